"""Routing: the backend registry, named backends, auto's choice, the boot probe that admits a
lane, and what accelerate() does when no backend is exact."""

from __future__ import annotations

import json
import logging
import os
import sys

import pytest
from conftest import LONG
from defects import ArraysDropAfterDigits, DropsAfterDigits, FastButWrong
from tokenizers import normalizers

import tokbackend
from tokbackend import FastPathError, backends
from tokbackend._routing import auto
from tokbackend.backends._gigatoken import GigatokenBackend
from tokbackend.backends._hf import HFBackend


@pytest.fixture
def fresh_auto_cache(monkeypatch, tmp_path):
    """auto's remembered choices live in a cache of the test's own."""
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    return tmp_path


# -- the registry -----------------------------------------------------------------------------


def test_registry_lists_builtins_and_refuses_duplicates():
    assert {"hf", "gigatoken"} <= set(backends.available_backends())
    with pytest.raises(ValueError, match="already registered"):
        backends.register_backend("gigatoken", GigatokenBackend)
    with pytest.raises(ValueError, match="registered backends: .*gigatoken"):
        tokbackend.accelerate(tokbackend.load_hf("qwen3"), backend="no-such-backend")


def test_hf_backend_is_exact(hf_tokenizer):
    fast = tokbackend.accelerate(hf_tokenizer, backend="hf")
    text = "<|im_start|>x 123 毕老师<think>"
    assert fast.encode(text) == hf_tokenizer.encode(text)
    assert fast.tokbackend.stats()["fast_texts"] == 1


def test_stats_is_a_read_only_typed_view_that_reads_as_a_mapping(fast_tokenizer):
    import dataclasses

    fast_tokenizer.encode("Hello")
    stats = fast_tokenizer.tokbackend.stats()
    assert isinstance(stats, tokbackend.Stats) and "Stats" in tokbackend.__all__
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.fast_texts = 0
    with pytest.raises(TypeError):
        stats["fast_texts"] = 0
    fields = [field.name for field in dataclasses.fields(stats) if field.name != "backend_stats"]
    assert all(getattr(stats, name) == stats[name] == stats.get(name) for name in fields)
    assert set(fields) | set(stats.backend_stats) == set(stats) and stats.backend == stats.routing["backend"]
    assert stats.fast_texts >= 1 and stats.get("no such key", "absent") == "absent"
    plain = stats.as_dict()
    assert type(plain) is dict and plain == dict(stats) and json.loads(json.dumps(plain)) == plain


def test_the_counts_of_threads_that_ended_and_of_those_alive_add_up():
    import threading

    from tokbackend._stats import AccelerationStats

    counters = AccelerationStats()
    for texts in (2, 3):  # each thread's cells are folded into the totals when the next thread counts
        thread = threading.Thread(target=counters.record_fast, args=(texts, True))
        thread.start()
        thread.join()
    counters.record_fast(5)
    counters.record_fast(1, as_arrays=True)
    counts = counters.snapshot()
    assert (counts["fast_calls"], counts["fast_texts"], counts["fast_texts_as_arrays"]) == (4, 11, 6)


def test_slow_or_foreign_objects_are_refused():
    with pytest.raises(TypeError, match="transformers tokenizer"):
        tokbackend.accelerate("qwen3")


# -- auto -------------------------------------------------------------------------------------


def test_auto_chooses_an_exact_backend_and_says_why(hf_tokenizer, fresh_auto_cache, caplog, monkeypatch):
    from tokbackend._routing import lanes

    built = []
    build_lane = lanes.build_lane
    monkeypatch.setattr(
        lanes, "build_lane", lambda *args, **kwargs: built.append(args[0]) or build_lane(*args, **kwargs)
    )
    with caplog.at_level(logging.INFO, logger="tokbackend"):
        fast = tokbackend.accelerate(hf_tokenizer, "auto")
    routing = fast.tokbackend.stats()["routing"]
    assert routing["backend"] == auto.candidates()[0] == "fastokens"
    # stats() names what serves, and what was asked for
    assert (fast.tokbackend.stats()["backend"], fast.tokbackend.stats()["backend_option"]) == ("fastokens", "auto")
    assert built == ["fastokens"], "auto built a backend it does not serve with"
    assert "the first in auto's order that is exact (fastokens, gigatoken)" in routing["reason"]
    assert "not built: gigatoken" in routing["reason"]
    assert "auto" in fast.tokbackend.describe() and routing["backend"] in fast.tokbackend.describe()
    assert fast.encode(LONG) == hf_tokenizer.encode(LONG)
    assert fast([LONG, "x"])["input_ids"] == hf_tokenizer([LONG, "x"])["input_ids"]
    assert fast.tokbackend.stats()["fast_texts"] == 3
    # a second start remembers the choice and builds only the chosen backend
    again = tokbackend.accelerate(hf_tokenizer, "auto")
    assert again.tokbackend.stats()["routing"]["backend"] == routing["backend"]
    from tokbackend._routing import choices

    reason = again.tokbackend.stats()["routing"]["reason"]
    assert reason.startswith("auto's choice for this model and these library versions, made by process ")
    assert f"{os.getpid()} of {sys.prefix} at " in reason  # this test's first start wrote it
    assert (
        f"kept in {choices.choices_file()} (shared by this user's processes; delete that file to choose afresh)"
        in reason
    )
    assert "first in auto's order" not in reason
    assert built == ["fastokens", "fastokens"]


def test_auto_builds_its_choice_alone_and_says_why(hf_tokenizer, fresh_auto_cache, monkeypatch):
    """auto builds the first candidate in its order that is exact (fastokens) and nothing else;
    the next start says its choice is a remembered one, and by which process."""
    from tokbackend._routing import lanes

    built = []
    build_lane = lanes.build_lane
    monkeypatch.setattr(
        lanes, "build_lane", lambda *args, **kwargs: built.append(args[0]) or build_lane(*args, **kwargs)
    )
    fast = tokbackend.accelerate(hf_tokenizer, "auto")
    routing = fast.tokbackend.stats()["routing"]
    assert routing["backend"] == "fastokens" and routing["reason"].startswith(
        "the first in auto's order that is exact"
    ), routing
    assert "not built: gigatoken" in routing["reason"] and built == ["fastokens"]
    assert fast.encode(LONG) == hf_tokenizer.encode(LONG) and fast.tokbackend.stats()["fast_texts"] == 1
    again = tokbackend.accelerate(hf_tokenizer, "auto")
    reason = again.tokbackend.stats()["routing"]["reason"]
    assert reason.startswith("auto's choice for this model and these library versions, made by process "), reason
    assert "first in auto's order" not in reason and built == ["fastokens", "fastokens"]


def test_a_backend_that_cannot_serve_the_model_is_passed_over(hf_tokenizer, fresh_auto_cache, register_for_test):
    """The first candidate fails the probe: auto says so and serves with the next."""
    register_for_test("fast-but-wrong", FastButWrong)
    fast = tokbackend.accelerate(hf_tokenizer, "auto")
    routing = fast.tokbackend.stats()["routing"]
    assert routing["backend"] == "fastokens"
    assert "fast-but-wrong not exact here" in routing["reason"] and "disagrees with HuggingFace" in routing["reason"]


def test_a_remembered_choice_is_not_reused_by_another_tokbackend_version(hf_tokenizer, monkeypatch):
    """What qualified depends on tokbackend's own probe and guard records."""
    from tokbackend import _version as version
    from tokbackend._routing import choices

    text_json = hf_tokenizer.backend_tokenizer.to_str()

    def key():
        return choices.choice_key(text_json, auto.candidates(), ("gigatoken", "fastokens"))

    first = key()
    assert key() == first
    monkeypatch.setattr(version, "VERSION", version.VERSION + ".post1")
    assert key() != first


def test_auto_never_routes_to_a_backend_the_probe_rejects(hf_tokenizer, fresh_auto_cache, register_for_test):
    register_for_test("fast-but-wrong", FastButWrong)
    fast = tokbackend.accelerate(hf_tokenizer, "auto")
    routing = fast.tokbackend.stats()["routing"]
    assert routing["backend"] != "fast-but-wrong"
    assert "fast-but-wrong not exact here" in routing["reason"]
    assert fast.encode("room 101") == hf_tokenizer.encode("room 101")


def test_auto_without_the_probe_would_route_to_the_planted_defect(hf_tokenizer, fresh_auto_cache, register_for_test):
    """The gate above is the probe: with it off, the wrong backend, first in auto's order, serves."""
    register_for_test("fast-but-wrong", FastButWrong)
    fast = tokbackend.accelerate(hf_tokenizer, "auto", probe=False)
    assert fast.tokbackend.stats()["routing"]["backend"] == "fast-but-wrong"
    assert fast.encode("room 101") != hf_tokenizer.encode("room 101")


def test_auto_with_no_exact_candidate_is_a_clear_error(hf_tokenizer, fresh_auto_cache, monkeypatch, register_for_test):
    register_for_test("fast-but-wrong", FastButWrong)
    monkeypatch.setattr(auto, "candidates", lambda: ["fast-but-wrong"])
    with pytest.raises(tokbackend.BackendUnavailableError, match="no backend is exact.*fast-but-wrong.*disagrees"):
        tokbackend.accelerate(hf_tokenizer, "auto")
    fast = tokbackend.accelerate(hf_tokenizer, "auto", allow_hf_fallback=True)
    assert not fast.tokbackend.fast_path_enabled
    assert fast.encode("room 101") == hf_tokenizer.encode("room 101")


# -- the boot probe, and no exact backend -----------------------------------------------------


@pytest.mark.parametrize("defect", [DropsAfterDigits, ArraysDropAfterDigits], ids=["lists", "arrays"])
def test_probe_turns_a_wrong_backend_off(fresh_pair, caplog, register_for_test, defect):
    """Wrong in lists, or only in the `array('q')` form SGLang's requests take."""
    register_for_test(defect.name, defect)
    hf, _ = fresh_pair
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, backend=defect.name)
    assert not fast.tokbackend.fast_path_enabled
    assert any("disagrees with HuggingFace" in record.getMessage() for record in caplog.records)
    text = "room 101"
    assert fast.encode(text) == hf.encode(text)  # served by HF, so still exact
    assert fast.tokbackend.stats()["fallbacks"]["fast_path_disabled"] == 1


def test_probe_raises_in_strict_mode(fresh_pair, register_for_test):
    register_for_test("drops-after-digits", DropsAfterDigits)
    hf, _ = fresh_pair
    with pytest.raises(FastPathError, match="drops-after-digits.*disagrees"):
        tokbackend.accelerate(hf, backend="drops-after-digits", strict=True)


def test_boot_probe_is_within_budget(fast_tokenizer):
    """A few milliseconds on a prepared backend (at start-up the probe also pays for a backend's
    first call: thread pools, lazy tables). Counted in this process's CPU time (its threads
    included), which other processes' load does not stretch as it stretches the wall clock
    (0.21 s of wall clock in one loaded run)."""
    import time

    from tokbackend._probe import run_probe
    from tokbackend._tokenizer import reference_of

    state = fast_tokenizer.tokbackend
    assert state.build.probe_seconds > 0
    cpu_seconds = []
    for _ in range(3):  # the least of three: another test's background work in this worker may
        started = time.process_time()  # share a run's CPU time (1.46 s in one run of the suite)
        result = run_probe(state.backend, reference_of(fast_tokenizer), state.guard)
        cpu_seconds.append(time.process_time() - started)
        assert result.mismatch is None
    assert min(cpu_seconds) < 0.05, (cpu_seconds, result.seconds)


def test_unloadable_tokenizer_raises_a_clear_error(fresh_pair, caplog):
    hf, _ = fresh_pair
    hf.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    with pytest.raises(tokbackend.BackendUnavailableError, match="gigatoken.*cannot serve.*allow_hf_fallback"):
        tokbackend.accelerate(hf, "gigatoken")
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, "gigatoken", allow_hf_fallback=True)
    assert not fast.tokbackend.fast_path_enabled
    assert fast.encode("HeLLo") == hf.encode("HeLLo") == hf.encode("hello")


# -- a new backend is one class --------------------------------------------------------------


class ToyBackend(HFBackend):
    """A backend as a third party would add one: its own name, its own guard records (derived
    here), HF tokenizers underneath."""

    name = "toy"
    is_reference = False
    needs_unicode_guard = True
    versioned_libraries = ("tokenizers",)
    guard_family = "toy"


@pytest.mark.slow  # a whole verify of a registered backend; CI registers backends in test_backends.py
def test_a_backend_is_one_registered_class_and_verify_runs_every_step_on_it(register_for_test, monkeypatch, tmp_path):
    from tokbackend._guard import GuardSettings
    from tokbackend._verify import EXIT_OK, verify_model

    register_for_test("toy", ToyBackend)
    code_points = list(range(0x4E00, 0x4E20)) + list(range(0x0400, 0x0420)) + [0x17F, 0x323B0]
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    lines: list[str] = []
    narrowed = GuardSettings(code_points=tuple(code_points))
    report = verify_model(
        "qwen3",
        backend="toy",
        profile="dev",
        examples=5,
        code_points=code_points,
        announce=lines.append,
        guard_settings=narrowed,
    )
    statuses = {step.name: step.status for step in report.steps}
    assert report.exit_code == EXIT_OK, lines[-20:]
    assert all(status in ("ok", "info") for status in statuses.values()), statuses
    assert list((tmp_path / "guards").glob("toy-*.json")), "no guard record was written for the toy backend"
    assert report.as_json()["versions"]["tokenizers"]


@pytest.mark.parametrize("damaged", ['{"cut short', "[1, 2]"], ids=["cut-short", "a-list"])
def test_a_damaged_choices_file_is_a_miss_named_then_written_anew(damaged, hf_tokenizer, fresh_auto_cache, caplog):
    from tokbackend._routing import choices

    choices.choices_file().parent.mkdir(parents=True, exist_ok=True)
    choices.choices_file().write_text(damaged)
    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        fast = tokbackend.accelerate(hf_tokenizer, "auto")
    assert fast.tokbackend.stats()["routing"]["backend"] == "fastokens"
    assert any(str(choices.choices_file()) in entry.getMessage() for entry in caplog.records)
    rewritten = json.loads(choices.choices_file().read_text())
    assert isinstance(rewritten, dict) and [entry["backend"] for entry in rewritten.values()] == ["fastokens"]
