"""Changes to the tokenizer after accelerate(): each one that can change an encode is seen on the
next call (the backend rebuilt, or HuggingFace answering), through the accelerated object or the
original; the check on every call never walks the vocabulary."""

from __future__ import annotations

import copy
import time
import timeit

import pytest
from conftest import fresh_qwen3
from defects import serve_with_fingerprint

import tokbackend
from tokbackend._guard import GuardSettings
from tokbackend._tokenizer import reference_of
from tokbackend.equivalence.changes import CHANGES, texts_for


@pytest.fixture
def narrow_derivations(monkeypatch, tmp_path) -> GuardSettings:
    """A change that makes a new pipeline derives its guard; here over a few blocks, not every
    code point (the guard settings returned, for accelerate()), in a cache of the test's own."""
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    return GuardSettings(code_points=(*range(0x4E00, 0x4E40), *range(0x1AC0, 0x1B00)))


def _cases():
    """Every change, through both objects, on both backends; CI runs each change once (through
    the original for even ones, the accelerated object for odd ones, backends alternating)."""
    for index, change in enumerate(CHANGES):
        for through in ("original", "accelerated"):
            for backend in ("gigatoken", "fastokens"):
                in_ci = (
                    through == ("original", "accelerated")[index % 2]
                    and backend == ("gigatoken", "fastokens")[index // 2 % 2]
                )
                yield pytest.param(
                    change,
                    through,
                    backend,
                    marks=() if in_ci else pytest.mark.slow,
                    id=f"{change.name}-{through}-{backend}",
                )


def test_a_change_that_makes_the_backend_wrong_on_ascii_is_refused_before_any_derivation(narrow_derivations, tmp_path):
    """gigatoken does not follow a ByteLevel add_prefix_space set in place: it is wrong on plain
    ASCII, which no guard sends to HF. The rebuild refuses it on the ASCII probe before deriving
    a guard (a derivation that, unnarrowed, finds nearly every code point divergent and scans
    all 1.1M of them: 2,279 s in one `tokbackend verify`); before, it derived, then probed."""
    hf = fresh_qwen3()
    fast = tokbackend.accelerate(hf, "gigatoken", guard=narrow_derivations)
    next(change for change in CHANGES if change.name == "a pre-tokenizer setting changed in place").apply(hf)
    assert fast.encode("Hello, world!") == hf.encode("Hello, world!")
    stats = fast.tokbackend.stats()
    assert not stats["fast_path_enabled"]
    assert "not derived: the backend disagrees with HuggingFace on the ASCII text" in stats["disabled_reason"]
    assert not list(tmp_path.glob("guards/*.json"))  # nothing was derived


@pytest.mark.parametrize("change, through, backend", list(_cases()))
def test_a_change_after_accelerate_is_seen_on_the_next_call(change, through, backend, narrow_derivations):
    hf = fresh_qwen3()
    fast = tokbackend.accelerate(hf, backend, guard=narrow_derivations)
    texts = texts_for(change, hf)
    change.apply(hf if through == "original" else fast)
    for text in texts:
        assert fast.encode(text) == hf.encode(text), (change.name, text)
    assert fast(texts)["input_ids"] == hf(texts)["input_ids"]
    assert "backend_error" not in fast.tokbackend.stats()["fallbacks"]


def test_a_change_that_leaves_the_content_alone_rebuilds_nothing(fresh_pair):
    hf, fast = fresh_pair
    build = fast.tokbackend.build
    existing = str(list(hf.added_tokens_decoder.values())[0])
    hf.add_special_tokens({"additional_special_tokens": [existing]})  # the same token, the same flags
    assert fast.encode("x" + existing) == hf.encode("x" + existing)
    assert fast.tokbackend.build is build


def test_the_check_on_every_call_never_walks_the_vocabulary(fresh_pair):
    """Walking the vocabulary is what tokenizers 0.22.2 and 0.23.2 do for
    `get_vocab_size(with_added_tokens=True)` (30 ms for Qwen3 per call); none of the calls that
    read the vocabulary or the added tokens may be made on the per-call path."""
    hf, fast = fresh_pair
    rust = hf.backend_tokenizer
    fast.encode("warm")

    def walks(*args, **kwargs):
        raise AssertionError("the per-call check read the vocabulary")

    rust.__dict__["get_vocab"] = walks
    rust.__dict__["get_added_tokens_decoder"] = walks
    rust.__dict__["get_vocab_size"] = lambda with_added_tokens=True: walks() if with_added_tokens else 151643
    try:
        for text in ("one", "two <|im_end|>", "three"):
            assert fast.encode(text) == hf.encode(text)
        # CPU time, which other processes' load does not stretch as it stretches the wall clock
        fingerprint = reference_of(fast).fingerprint
        seconds = min(timeit.repeat(fingerprint, number=200, repeat=5, timer=time.process_time)) / 200
    finally:
        for name in ("get_vocab", "get_added_tokens_decoder", "get_vocab_size"):
            del rust.__dict__[name]
    assert seconds < 50e-6, f"the per-call check takes {seconds * 1e6:.1f} us"


def test_a_check_that_misses_a_change_is_caught(fresh_pair):
    """A planted defect: a fingerprint that never changes. The change-after-accelerate test's own
    inputs then find a stale backend."""
    hf, fast = fresh_pair
    serve_with_fingerprint(fast, lambda: "never changes")
    hf.add_tokens(["hello"])
    assert fast.encode("xhelloy") != hf.encode("xhelloy")


def _references_left(strong_watch: bool, monkeypatch) -> int:
    """References to an accelerated tokenizer's Rust object once the tokenizer is gone (the
    test's own variable and getrefcount's argument are two)."""
    import gc
    import sys
    import types

    from tokbackend import _watch as watch

    if strong_watch:  # the planted defect: wrappers that hold the Rust object, never removed

        def no_weak_reference(target):
            raise TypeError("planted")

        monkeypatch.setattr(watch, "weakref", types.SimpleNamespace(ref=no_weak_reference, finalize=lambda *args: None))
    hf = fresh_qwen3()
    rust = hf.backend_tokenizer
    fast = tokbackend.accelerate(hf, "gigatoken")
    fast.encode("warm")
    fast.add_tokens(["<counted>"])
    del hf, fast
    gc.collect()
    return sys.getrefcount(rust)


def test_watching_for_changes_keeps_no_tokenizer_alive(monkeypatch):
    """On tokenizers 0.22 the Rust Tokenizer takes no weak reference and is not garbage
    collected, so wrappers that held it would keep every copied tokenizer (hundreds of MB for a
    large vocabulary) forever; on 0.23 they hold a weak one. Either way nothing is left once the
    Python tokenizer is collected, and a planted strong, never-removed wrapper is seen here."""
    assert _references_left(strong_watch=False, monkeypatch=monkeypatch) == 2
    assert _references_left(strong_watch=True, monkeypatch=monkeypatch) > 2


def test_the_settings_gate_keeps_no_tokenizer_alive_and_needs_no_weak_reference():
    """One gate per Rust tokenizer, shared by every accelerated object over it, on tokenizers
    0.22 too, whose Tokenizer takes no weak reference (the gate registry was weak-keyed by it
    once: every accelerate() raised TypeError there). A plain object stands for such a
    tokenizer; its entry goes once no accelerated object holds it."""
    import gc

    from tokbackend import _shared_settings as shared_settings

    class Owner:  # an accelerated tokenizer: it holds its Rust tokenizer
        def __init__(self, rust):
            self._tokenizer = rust

    rust, other = object(), object()  # neither takes a weak reference
    first, second, third = Owner(rust), Owner(rust), Owner(other)
    gate = shared_settings.gate_of(rust, first)
    assert shared_settings.gate_of(rust, second) is gate
    assert shared_settings.gate_of(other, third) is not gate
    del first, second, rust
    gc.collect()
    assert shared_settings.gate_of(other, third) is not gate  # a later lookup drops what no owner holds
    assert gate not in [entry for entry, _ in shared_settings._gates.values()]
    assert all(owners for _, owners in shared_settings._gates.values())


def test_accelerate_works_where_the_rust_tokenizer_takes_no_weak_reference(hf_tokenizer):
    import weakref

    fast = tokbackend.accelerate(hf_tokenizer, "fastokens")
    try:
        weakref.ref(hf_tokenizer._tokenizer)
        weak = True
    except TypeError:  # tokenizers 0.22 (SGLang 0.5.13-0.5.19 pin it): what this test is for
        weak = False
    copied = copy.copy(fast)
    assert fast._tokbackend_gate is copied._tokbackend_gate
    assert copied("Hello there, ſ's")["input_ids"] == hf_tokenizer("Hello there, ſ's")["input_ids"], weak
