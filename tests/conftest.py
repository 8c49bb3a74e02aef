"""Shared fixtures: the two built-in models, plain and accelerated (built once per session)."""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from pathlib import Path

import pytest

import tokbackend
import tokbackend.equivalence
from tokbackend.equivalence.corpus import prompt_text

_CHECKOUT = Path(__file__).resolve().parents[1]
_PACKAGE, _HARNESS = (Path(module.__file__).resolve().parent for module in (tokbackend, tokbackend.equivalence))
if os.environ.get("TOKBACKEND_TESTS_INSTALLED"):
    # .ci/tests: what is tested is the installed wheel, never this checkout
    _TREE = _CHECKOUT / "tokbackend"
    assert not _PACKAGE.is_relative_to(_TREE), f"tokbackend imported from the source tree: {_PACKAGE}"
    assert _HARNESS == _PACKAGE / "equivalence", f"tokbackend.equivalence is not the wheel's: {_HARNESS}"
else:
    # the harness of one checkout testing the package of another tests neither
    # (a checkout maps its equivalence/ folder in beside tokbackend/; a wheel ships it inside)
    assert _HARNESS in (_PACKAGE.parent / "equivalence", _PACKAGE / "equivalence"), (
        f"tokbackend from {_PACKAGE} but tokbackend.equivalence from {_HARNESS}: run with PYTHONPATH=<checkout>"
        " or `pip install -e .` from it (CONTRIBUTING.md, 'Running a checkout')"
    )

BUILTIN_MODELS = ("qwen3.6", "qwen3")
# Every exactness and split-surface test that takes `fast_tokenizer` runs on each backend.
BACKENDS = ("gigatoken", "fastokens")


@pytest.fixture(scope="session", params=BUILTIN_MODELS)
def model_name(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def hf_tokenizer(model_name):
    """The plain HuggingFace tokenizer; tests must not mutate it (use `fresh_pair`)."""
    return tokbackend.load_hf(model_name)


@pytest.fixture(scope="session", params=BACKENDS)
def backend_name(request) -> str:
    return request.param


# Texts many tests encode: code, prose and mixed prompts, added tokens, emoji and combining
# sequences, and one with code points the guards of gigatoken and fastokens route to HF.
MIXED_TEXTS = [prompt_text(seed, 3000, kind) for seed in range(6) for kind in ("code", "prose", "mixed")] + [
    "<|im_start|>user\n<think>x</think><|im_end|>",
    "e\u0301 \U0001f468\u200d\U0001f469 1\ufe0f\u20e3",
    "a\u0300\u0300\u1ae6 guarded \u017f's text",
]
# One long text (~3k tokens) of letters, CJK, a contraction and digits.
LONG = "The quick brown fox 毕老师 don't 12345 " * 400

_accelerated: dict[tuple[str, str], object] = {}


def renewals_finished() -> None:
    """Wait for the renewals under way: each builds its fresh instance on a thread nobody joins."""
    for thread in threading.enumerate():
        if thread.name == "tokbackend-renewal":
            thread.join()


@pytest.fixture(scope="session")
def fast_tokenizer(model_name, hf_tokenizer, backend_name):
    """The accelerated tokenizer over `hf_tokenizer` on `backend_name`; tests must not mutate it.
    Built once per (model, backend) and kept, so the parametrization's order costs no rebuilds."""
    key = (model_name, backend_name)
    if key not in _accelerated:
        _accelerated[key] = tokbackend.accelerate(hf_tokenizer, backend_name)
    return _accelerated[key]


@pytest.fixture(autouse=True)
def _fresh_server_process(monkeypatch):
    """Each test starts as a fresh server process: it shares no build with a tokenizer an earlier
    test accelerated for a server (`tokbackend.integrations._common`), which would hide what the
    test plants."""
    from tokbackend.integrations import _common as common

    monkeypatch.setattr(common, "_built", ())


@pytest.fixture
def fresh_pair():
    """An independent (hf, gigatoken-accelerated) Qwen3 pair for tests that add tokens or change state."""
    hf = fresh_qwen3()
    return hf, tokbackend.accelerate(hf, "gigatoken")


_template = {}


def fresh_qwen3():
    """A Qwen3 HF tokenizer of the test's own (a deep copy of one loaded once per session)."""
    if "qwen3" not in _template:
        _template["qwen3"] = tokbackend.load_hf("qwen3")
    return copy.deepcopy(_template["qwen3"])


@pytest.fixture
def register_for_test(monkeypatch):
    """register_for_test(name, cls): a backend registered for one test only, so that later
    tests' backend="auto" never considers it."""
    from tokbackend import backends

    backends.available_backends()  # entry points first, so the test's entry is not overwritten

    def register(name, backend_class):
        monkeypatch.setitem(backends._registry.factories, name, backend_class)

    return register


@contextlib.contextmanager
def held_by_another_thread(lock):
    """`lock` held by another thread for the duration (a rebuild or a store in progress when a
    server forks, say)."""
    holding, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            holding.set()
            release.wait(120)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    try:
        yield
    finally:
        release.set()
        holder.join()


def fast_counts(tokenizer) -> tuple[int, dict[str, int]]:
    stats = tokenizer.tokbackend.stats()
    return stats["fast_texts"], stats["fallbacks"]


# Tests of what tokbackend wraps around a backend (grammar engines' view of the vocabulary, the
# HF object's settings, warnings and saved files, copies, a spawned child), not of a backend's ids:
# in CI on gigatoken, on fastokens too in the thorough profile.
WRAPPER_TESTS = frozenset(
    {
        "test_xgrammar_tokenizer_info_equals_hf",
        "test_llguidance_tokenizer_builds_with_hf_vocabulary",
        "test_grammar_gate_passes_on_the_accelerated_tokenizer",
        "test_length_warnings_are_hfs",
        "test_the_tokenizer_given_to_accelerate_reads_encodes_and_saves_as_hf_leaves_it",
        "test_settings_and_saved_file_are_what_hf_leaves_after_every_call",
        "test_copies_share_it_and_pickles_start_empty",
    }
)


def pytest_collection_modifyitems(items):
    """The CI profile runs the shared fixtures on Qwen3.6 (the default model) with every backend,
    and children started by fork (both backends) and spawn (gigatoken). Qwen3 through these
    fixtures, forkserver children, spawned fastokens children and the wrapper tests on fastokens
    (`WRAPPER_TESTS`) are in the thorough profile (`-m slow`); Qwen3 stays in CI through `verify
    --quick` and the guard tests that name it."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        backend = params.get("backend_name", params.get("backend"))
        if (
            params.get("model_name") == "qwen3"
            or params.get("method") == "forkserver"
            or (params.get("method") == "spawn" and backend == "fastokens")
            or (item.originalname in WRAPPER_TESTS and backend == "fastokens")
        ):
            item.add_marker(pytest.mark.slow)
