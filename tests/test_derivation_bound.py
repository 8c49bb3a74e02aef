"""The bound on a guard derivation where it serves (`tokbackend._guard.scan`): a backend wrong on
ASCII is refused before anything past ASCII is scanned, a derivation past its time or its memory
is cut off and writes no record (the backend is then not exact here, and HuggingFace serves), the
offline derivation is not bounded, and a record is found only for what its content depends on.
Each gate is driven to failure by a planted defect of its class (`tests/defects.py`)."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
from conftest import fresh_qwen3
from defects import DropsOnAsciiLetters, allocates_when_scanning, allocates_while_other_work_frees, slow_to_scan

import tokbackend
from tokbackend import _cli as cli
from tokbackend import _guard as guard_module
from tokbackend._guard import GuardSettings, derive, records
from tokbackend._guard.records import find_record, model_fingerprint, pipeline_fingerprint, record_key, write_record
from tokbackend._guard.scan import UNBOUNDED, DerivationBudget, DerivationMeter, DerivationOverBudget
from tokbackend.backends import backend_class
from tokbackend.equivalence.changes import CHANGES
from tokbackend.equivalence.families import build_family

STABLE = list(range(0x4E00, 0x4E40)) + list(range(0x0400, 0x0440))  # old CJK and Cyrillic letters
FAKE_VERSIONS = {"tokenizers": "9.9.9", "gigatoken": "9.9.9"}


@pytest.fixture
def unseen(monkeypatch, tmp_path):
    """No baked record and an empty cache (its guards directory returned); `_unshipped(tmp_path)`
    adds no shipped record: every pipeline derives, the planted backends (gigatoken's family) too."""
    monkeypatch.delenv(records.BAKED_RECORDS_ENV, raising=False)
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "guards"


def _unshipped(tmp_path, **changes) -> GuardSettings:
    """The guard settings accelerate() serves with, reading shipped records from an empty
    directory, with `changes` (budget, code_points)."""
    return dataclasses.replace(GuardSettings(shipped_records=tmp_path / "no-shipped-records"), **changes)


def _clocked(clock, budget: DerivationBudget = guard_module.DERIVATION_BUDGET) -> DerivationBudget:
    """`budget` metered on `clock` (both of its clocks, wall and CPU)."""
    return dataclasses.replace(budget, clocks=(clock, clock))


class HandClock:
    """Both clocks of a derivation's meter (wall and CPU), moved by the planted backend alone."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def hand_clock():
    return HandClock()


def _records(directory) -> list:
    return sorted(directory.glob("*.json"))


# -- a backend wrong on ASCII -----------------------------------------------------------------


def test_a_backend_wrong_on_ascii_letters_is_refused_before_anything_past_ascii_is_scanned(
    unseen, register_for_test, monkeypatch, tmp_path
):
    """Without the boot probe (probe=False) the derivation refuses it itself, on the 128 ASCII
    code points: no guard sends an ASCII text to HuggingFace, and its derivation would find
    nearly every code point divergent and scan them all (2,200 s in one `tokbackend verify`)."""
    register_for_test(DropsOnAsciiLetters.name, DropsOnAsciiLetters)
    monkeypatch.setattr(DropsOnAsciiLetters, "largest_seen", 0)
    hf = fresh_qwen3()
    fast = tokbackend.accelerate(hf, DropsOnAsciiLetters.name, probe=False, guard=_unshipped(tmp_path))
    stats = fast.tokbackend.stats()
    assert not stats["fast_path_enabled"]
    assert "not derived: the backend differs from HuggingFace on the ASCII text" in stats["disabled_reason"]
    assert DropsOnAsciiLetters.largest_seen < 0x80  # it was asked to encode ASCII alone
    assert not _records(unseen)
    assert fast.encode("Hello, world!") == hf.encode("Hello, world!")
    # the planted derivation without the refusal scans on past ASCII and writes what it found
    monkeypatch.setattr(derive, "refuse_inexact_on_ascii", lambda *args, **kwargs: None)
    tokbackend.accelerate(
        hf, DropsOnAsciiLetters.name, probe=False, guard=_unshipped(tmp_path, code_points=tuple(STABLE))
    )
    assert DropsOnAsciiLetters.largest_seen >= 0x400 and _records(unseen)


def test_the_change_of_the_issue_is_refused_without_a_probe_and_writes_no_record(monkeypatch, tmp_path):
    """gigatoken after a ByteLevel add_prefix_space set in place (`tokbackend verify`'s change,
    which derived for 2,200 s and saved the record): refused in the derivation's first
    milliseconds, also with probe=False; nothing is written."""
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    hf = fresh_qwen3()
    fast = tokbackend.accelerate(hf, "gigatoken", probe=False)
    next(change for change in CHANGES if change.name == "a pre-tokenizer setting changed in place").apply(hf)
    assert fast.encode("Hello, world!") == hf.encode("Hello, world!")
    stats = fast.tokbackend.stats()
    assert not stats["fast_path_enabled"]
    assert "on the ASCII text" in stats["disabled_reason"]
    assert not _records(tmp_path / "guards")


# -- the time bound ---------------------------------------------------------------------------


def test_a_slow_derivation_is_cut_off_by_the_time_bound(unseen, hand_clock, register_for_test, caplog, tmp_path):
    """0.1 s (on the hand clock) a batch call: the derivation's screen fits in 10 s, its scan does
    not. It stops at the bound, writes no record, says how to derive offline, and HuggingFace
    serves."""
    slow = slow_to_scan(hand_clock.advance, 0.1)
    register_for_test(slow.name, slow)
    hf = fresh_qwen3()
    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, slow.name, guard=_unshipped(tmp_path, budget=_clocked(hand_clock)))
    stats = fast.tokbackend.stats()
    assert not stats["fast_path_enabled"]
    assert "over its bound" in stats["disabled_reason"] and "of its 10 s" in stats["disabled_reason"]
    assert any("tokbackend guard <model> --full" in record.getMessage() for record in caplog.records)
    assert not _records(unseen)
    assert fast.encode("Hello, world!") == hf.encode("Hello, world!")


def test_the_planted_slow_derivation_runs_on_without_the_bound(unseen, hand_clock, register_for_test, tmp_path):
    """The same slow backend with no bound derives past 10 s (on the hand clock) and serves: the
    test above is cut off by the bound, not by anything else."""
    slow = slow_to_scan(hand_clock.advance, 0.1)
    register_for_test(slow.name, slow)
    fast = tokbackend.accelerate(
        fresh_qwen3(), slow.name, guard=_unshipped(tmp_path, budget=_clocked(hand_clock, UNBOUNDED))
    )
    assert fast.tokbackend.fast_path_enabled
    assert hand_clock.now > 10 and len(_records(unseen)) == 1


def test_the_meter_reads_the_lesser_of_wall_clock_and_cpu_time():
    """A loaded machine stretches the wall clock, not the CPU time: that does not cut a fair
    derivation off; work past the bound on both clocks does."""
    wall, cpu = HandClock(), HandClock()
    meter = DerivationMeter(DerivationBudget(seconds=10.0, clocks=(wall, cpu)), "a derivation")
    wall.advance(40.0)
    cpu.advance(6.0)
    meter.check("loaded machine")
    cpu.advance(30.0)
    with pytest.raises(DerivationOverBudget, match="over its bound") as stopped:
        meter.check("past the bound")
    assert stopped.value.what == "time"


# -- the memory bound -------------------------------------------------------------------------


def test_an_allocating_derivation_is_cut_off_by_the_memory_bound(unseen, register_for_test, caplog, tmp_path):
    """16 MiB kept from each batch call, against a 64 MiB bound (the 500 MiB one is the same
    check): cut off within the first few calls, no record written."""
    settings = _unshipped(tmp_path, budget=DerivationBudget(seconds=10.0, megabytes=64))
    allocating = allocates_when_scanning(16)
    register_for_test(allocating.name, allocating)
    try:
        with caplog.at_level(logging.WARNING, logger="tokbackend"):
            fast = tokbackend.accelerate(fresh_qwen3(), allocating.name, guard=settings)
        calls = len(allocating.held)
    finally:
        allocating.held.clear()
    stats = fast.tokbackend.stats()
    assert not stats["fast_path_enabled"]
    assert "MiB of resident memory of its 64 MiB" in stats["disabled_reason"]
    assert calls < 40  # the boot probe's calls and a few of the derivation's
    assert not _records(unseen)


def test_memory_other_work_frees_during_a_derivation_makes_no_room_for_it(unseen, register_for_test, tmp_path):
    """768 MiB freed by other work inside the first batch call, then 16 MiB kept from each call,
    against a 64 MiB bound: growth counts from the lowest the resident set has been, so the
    derivation is cut off within a few calls of the fall. Counted from where it started (as
    before: a CI run let 59 calls through while another test's memory was being freed), 26
    calls got through here."""
    settings = _unshipped(tmp_path, budget=DerivationBudget(seconds=10.0, megabytes=64))
    allocating = allocates_while_other_work_frees(768, 16)
    register_for_test(allocating.name, allocating)
    allocating.start_other_work()
    try:
        fast = tokbackend.accelerate(fresh_qwen3(), allocating.name, guard=settings)
        calls = len(allocating.held)
    finally:
        allocating.held.clear()
        allocating.other_work.clear()
    stats = fast.tokbackend.stats()
    assert not stats["fast_path_enabled"]
    assert "MiB of resident memory of its 64 MiB" in stats["disabled_reason"]
    assert calls < 12
    assert not _records(unseen)


# -- the offline derivation -------------------------------------------------------------------


@pytest.mark.slow  # a full derivation on the hand clock; the bound's planted-defect tests stay in CI
def test_the_offline_derivation_is_not_bounded(unseen, hand_clock, register_for_test, tmp_path, capsys):
    """`tokbackend guard` (fast and --full) derives however long the scan takes: 1 s a batch call
    on the hand clock, far past the serving bound."""
    slow = slow_to_scan(hand_clock.advance, 1.0)
    register_for_test(slow.name, slow)
    assert cli.derive_guard("qwen3", slow.name, str(tmp_path / "baked")) == 0
    assert hand_clock.now > 100
    assert len(list((tmp_path / "baked").glob("gigatoken-*.json"))) == 1
    text = fresh_qwen3().backend_tokenizer.to_str()
    kind = backend_class(slow.name)
    started = hand_clock.now
    full = derive.derive_record(
        record_key(text, "gigatoken"),
        lambda json_text: kind(json_text, kind.options_for_scanning()),
        FAKE_VERSIONS, code_points=STABLE + list(range(0x323B0, 0x32400)), full=True,
    )  # fmt: skip
    assert hand_clock.now - started > 10 and full["code_points"]


# -- what a record is keyed by ----------------------------------------------------------------


def _sentencepiece() -> str:
    """A SentencePiece-style pipeline (byte_fallback, no ByteLevel): the ids oracle's, so its
    record is the model's."""
    return build_family("llama2-legacy", "small").backend_tokenizer.to_str()


def _model_record(tokenizer_json: str, directory) -> dict:
    kind = backend_class("gigatoken")
    record = derive.derive_record(
        record_key(tokenizer_json, "gigatoken"),
        lambda text: kind(text, kind.options_for_scanning()),
        FAKE_VERSIONS,
        code_points=STABLE,
    )
    write_record(record, directory / "guards")
    return record


def _with_added_token(tokenizer_json: str) -> str:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.add_tokens(["\u4e2d\u6587"])  # inside what the derivation scans
    return tokenizer.to_str()


def _with_other_merges(tokenizer_json: str) -> str:
    spec = json.loads(tokenizer_json)
    spec["model"]["merges"] = spec["model"]["merges"][:-1]
    return json.dumps(spec, ensure_ascii=False)


def test_a_changed_tokenizer_never_reuses_the_model_record_of_another(unseen, monkeypatch):
    """A model-scope record (the ids oracle encoded with the vocabulary and the added tokens) is
    found for that tokenizer alone: one with a token added, or other merges, derives its own.
    The planted key that leaves the added tokens out (the model fingerprint alone, as before)
    hands the changed tokenizer the other's record."""
    cache = unseen.parent
    original = _sentencepiece()
    record = _model_record(original, cache)
    assert record["scope"] == "model" and record["vocabulary_fingerprint"]
    found, _ = find_record(record_key(original, "gigatoken"), cache, FAKE_VERSIONS)
    assert found is not None and found["matched"] == "model"
    for changed in (_with_added_token(original), _with_other_merges(original)):
        assert pipeline_fingerprint(changed) == pipeline_fingerprint(original)
        assert find_record(record_key(changed, "gigatoken"), cache, FAKE_VERSIONS)[0] is None
    monkeypatch.setattr(records, "vocabulary_fingerprint", model_fingerprint)
    planted = _model_record(original, cache)
    assert planted["scope"] == "model"
    assert find_record(record_key(_with_added_token(original), "gigatoken"), cache, FAKE_VERSIONS)[0] is not None


def test_a_subword_affix_is_in_the_pipeline_key_only_where_it_is_set():
    """The boundary oracle keeps the model's subword prefix and suffix (they change its ids): set,
    they are keyed; unset or empty, the key is what it was (the shipped records' keys)."""
    text = fresh_qwen3().backend_tokenizer.to_str()
    spec = json.loads(text)
    keys = {}
    for value in ("", "</w>"):
        spec["model"]["end_of_word_suffix"] = value
        keys[value] = pipeline_fingerprint(json.dumps(spec, ensure_ascii=False))
    assert keys[""] == pipeline_fingerprint(text)
    assert keys["</w>"] != keys[""]


@pytest.mark.parametrize("model", ["qwen3", "qwen3.6"])
def test_the_shipped_records_are_still_found(model, tmp_path):
    """Keyed as before: the built-in models' pipelines find their shipped record, by pipeline,
    for both backends."""
    text = tokbackend.load_hf(model).backend_tokenizer.to_str()
    for backend in ("gigatoken", "fastokens"):
        versions = {"tokenizers": "0.23.3", backend: {"gigatoken": "0.10.0", "fastokens": "0.3.5"}[backend]}
        record, _ = find_record(record_key(text, backend), tmp_path, versions)
        assert record is not None and record["matched"] == "pipeline"
        assert record["path"].startswith(str(records.SHIPPED_RECORDS))
