"""A Rust panic wherever a backend runs is an ordinary, reported error. pyo3's PanicException is a
BaseException: it sails past every `except Exception`, and before these tests a panic in a
backend's load on a background thread left the start-up build provisional for good and one in a
registered backend's load escaped `accelerate()` itself. Each point is planted with
`defects.rust_panic`."""

from __future__ import annotations

import threading

import pytest
from defects import rust_panic

import tokbackend
from tokbackend._guard import GuardSettings, derive
from tokbackend._verify import EXIT_UNAVAILABLE, verify_model
from tokbackend.backends._base import BackendUnavailableError
from tokbackend.backends._fastokens import FastokensBackend
from tokbackend.backends._gigatoken import GigatokenBackend

TEXT = "Hello world, how are you? 毕老师 naïve café 12345"


@pytest.fixture(scope="module")
def qwen3():
    return tokbackend.load_hf("qwen3")


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


class PanicsOnLoad(GigatokenBackend):
    name = "panics-on-load"

    def __init__(self, tokenizer_json, options=None):
        raise rust_panic("called `Option::unwrap()` on a `None` value (planted)")


class PanicsOnEncode(GigatokenBackend):
    """Exact but for texts holding "PANIC", on which it panics past its own guard."""

    name = "panics-on-encode"

    def encode_batch(self, texts):
        if any("PANIC" in text for text in texts):
            raise rust_panic("index out of bounds (planted)")
        return super().encode_batch(texts)

    def encode(self, text):
        return self.encode_batch([text])[0]


class PanicsWhenProbed(GigatokenBackend):
    name = "panics-when-probed"

    def encode_batch(self, texts):
        raise rust_panic("attempt to subtract with overflow (planted)")


def test_a_named_backend_whose_load_panics_is_unavailable(qwen3, fresh_cache, register_for_test):
    register_for_test("panics-on-load", PanicsOnLoad)
    with pytest.raises(BackendUnavailableError, match="panics-on-load panicked while building its lane"):
        tokbackend.accelerate(qwen3, "panics-on-load")
    served = tokbackend.accelerate(qwen3, "panics-on-load", allow_hf_fallback=True)
    assert "panicked" in served.tokbackend.disabled_reason
    assert served.encode(TEXT) == qwen3.encode(TEXT)


def test_auto_moves_past_a_backend_whose_load_panics_on_a_background_thread(qwen3, fresh_cache, monkeypatch):
    """fastokens, auto's first choice, panics as it loads on any thread but the main one (a lane
    loads its backend on a thread of its own): auto moves on, and gigatoken serves."""
    load = FastokensBackend.__init__

    def panics_off_the_main_thread(self, *arguments, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            raise rust_panic("fastokens: failed to build the regex (planted)")
        load(self, *arguments, **kwargs)

    monkeypatch.setattr(FastokensBackend, "__init__", panics_off_the_main_thread)
    fast = tokbackend.accelerate(qwen3)
    start_up, routing = fast.tokbackend.stats()["start_up"], fast.tokbackend.stats()["routing"]
    assert start_up["phase"] == "final", start_up
    assert routing["backend"] == "gigatoken"
    assert "fastokens not exact here" in routing["reason"] and "panicked" in routing["reason"], routing
    assert fast.encode(TEXT) == qwen3.encode(TEXT)


def test_a_backend_that_panics_on_the_probe_is_not_exact(qwen3, fresh_cache, register_for_test):
    """A probe mismatch turns the fast path off (an ERROR; strict=True raises) and says why."""
    register_for_test("panics-when-probed", PanicsWhenProbed)
    fast = tokbackend.accelerate(qwen3, "panics-when-probed")
    assert not fast.tokbackend.fast_path_enabled and "panicked" in fast.tokbackend.disabled_reason
    assert (fast.tokbackend.stats()["backend"], fast.tokbackend.stats()["backend_option"]) == (
        "hf",
        "panics-when-probed",
    )
    assert fast.encode(TEXT) == qwen3.encode(TEXT)
    with pytest.raises(tokbackend.FastPathError, match="panicked"):
        tokbackend.accelerate(qwen3, "panics-when-probed", strict=True)


def test_a_panic_while_encoding_is_answered_by_hf_and_counted(qwen3, fresh_cache, register_for_test):
    register_for_test("panics-on-encode", PanicsOnEncode)
    fast = tokbackend.accelerate(qwen3, "panics-on-encode")
    text = f"{TEXT} PANIC"
    assert fast.encode(text) == qwen3.encode(text)
    assert fast([TEXT, text])["input_ids"] == qwen3([TEXT, text])["input_ids"]
    assert fast.tokbackend.stats()["fallbacks"].get("backend_error", 0) >= 2, fast.tokbackend.stats()["fallbacks"]


@pytest.fixture
def panicking_derivation(monkeypatch, tmp_path) -> GuardSettings:
    """No record for any pipeline (the guard settings returned read shipped records from an empty
    directory), and every guard derivation panics when it records."""

    def derive_record(*arguments, **keywords):
        raise rust_panic("stack overflow in the scan (planted)")

    monkeypatch.setattr(derive, "derive_record", derive_record)
    return GuardSettings(shipped_records=tmp_path / "no-shipped-records")


def test_a_panic_in_the_guards_derivation_is_the_builds_reported_error(qwen3, fresh_cache, panicking_derivation):
    with pytest.raises(BackendUnavailableError, match="gigatoken panicked while building its lane"):
        tokbackend.accelerate(qwen3, "gigatoken", guard=panicking_derivation)
    fast = tokbackend.accelerate(qwen3, "gigatoken", allow_hf_fallback=True, guard=panicking_derivation)
    stats = fast.tokbackend.stats()
    assert stats["start_up"]["phase"] == "off" and "panicked" in stats["disabled_reason"], stats["start_up"]
    assert fast.encode(TEXT) == qwen3.encode(TEXT)


def test_verify_fails_on_a_build_that_a_panic_stopped(fresh_cache, panicking_derivation):
    lines: list[str] = []
    report = verify_model(
        "qwen3",
        backend="gigatoken",
        only={"chat"},
        announce=lines.append,
        progress=False,
        guard_settings=panicking_derivation,
    )
    assert report.exit_code == EXIT_UNAVAILABLE, "\n".join(lines)
    assert "panicked" in report.steps[0].detail


def test_a_panic_building_a_renewing_backends_fresh_instance_is_reported_and_it_serves_on(qwen3, caplog):
    """A renewal's fresh instance is built on a thread nobody joins: a panic there is a WARNING,
    never a thread that died silently, the serving instance goes on answering, and the next
    renewal comes after as much growth again."""
    import logging

    from tokbackend.backends._renewal import RenewingBackend

    tokenizer_json = qwen3.backend_tokenizer.to_str()
    builds = []

    def build():
        builds.append(None)
        if len(builds) > 1:
            raise rust_panic("out of memory building a fresh instance (planted)")
        return GigatokenBackend(tokenizer_json, GigatokenBackend.Options(warm=False))

    backend = RenewingBackend(build, 16)
    backend._growth = 16 << 20  # as a call that crossed the threshold leaves it
    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        backend._renew()
    assert any(
        "building a fresh instance failed" in r.getMessage() and "panicked" in r.getMessage() for r in caplog.records
    )
    assert backend.stats()["cache_renewals"] == 0 and backend._growth == 0
    assert backend.encode("Hello world") == qwen3.encode("Hello world")
