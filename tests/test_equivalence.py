"""The exactness harness against both built-in models, and `tokbackend verify`'s contract."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from tokenizers import normalizers

import tokbackend
from equivalence.decode_report import decode_cases, gigatoken_decode
from equivalence.differential import compare, find_mismatch
from equivalence.grammar import grammar_gate
from equivalence.strategies import EXAMPLES, input_classes
from equivalence.vocabularies import vocabulary_dir
from tokbackend import cli
from tokbackend.backends.gigatoken import GigatokenBackend
from tokbackend.backends.hf import HFBackend
from tokbackend.cache import cache_dir
from tokbackend.guard import UnicodeGuard, guard_versions, model_fingerprint
from tokbackend.guard.contexts import ScanContext, derive_contexts
from tokbackend.guard.records import BAKED_RECORDS_ENV, find_record, write_record
from tokbackend.guard.scan import all_code_points, from_ranges, plane_code_points, ranges, scan
from tokbackend.state import AccelerationState
from tokbackend.tokenizer import AcceleratedTokenizerMixin
from tokbackend.verify import EXIT_GRAMMAR, EXIT_MISMATCH, EXIT_OK, EXIT_UNAVAILABLE, verify_model

CLASS_NAMES = sorted(input_classes([]))


@pytest.mark.parametrize("input_class", CLASS_NAMES)
def test_accelerated_encode_equals_hf_for_every_input_class(hf_tokenizer, fast_tokenizer, input_class):
    added = [str(token) for token in hf_tokenizer.added_tokens_decoder.values()]
    strategy = input_classes(added)[input_class]()
    profile = settings.get_profile("ci")
    if input_class == "long_prompts":
        profile = settings(profile, max_examples=4)
    before = fast_tokenizer.tokbackend.stats()["fast_texts"]
    mismatch = find_mismatch(hf_tokenizer.encode, fast_tokenizer.encode, strategy, input_class, profile)
    assert mismatch is None, mismatch.report()
    assert fast_tokenizer.tokbackend.stats()["fast_texts"] > before, "the backend answered none of the examples"


PINNED = [(input_class, text) for input_class, texts in EXAMPLES.items() for text in texts]


@pytest.mark.parametrize(("input_class", "text"), PINNED, ids=lambda value: ascii(value)[:40])
def test_pinned_counterexamples_stay_exact(hf_tokenizer, fast_tokenizer, input_class, text):
    assert fast_tokenizer.encode(text) == hf_tokenizer.encode(text)
    assert fast_tokenizer(text)["input_ids"] == hf_tokenizer(text)["input_ids"]


def test_find_mismatch_replays_the_pinned_examples(hf_tokenizer):
    pinned = EXAMPLES["recent_code_points"][1]

    def wrong_on_the_pinned_example(text):
        ids = hf_tokenizer.encode(text)
        return ids + [0] if text == pinned else ids

    profile = settings(settings.get_profile("ci"), max_examples=1)
    mismatch = find_mismatch(hf_tokenizer.encode, wrong_on_the_pinned_example, st.just("x"), "recent_code_points", profile)
    assert mismatch is not None and mismatch.text == pinned


def _letter_class(fast_tokenizer) -> frozenset[int]:
    """The code points the guard holds because gigatoken reads them as letters and HF does not."""
    return from_ranges(fast_tokenizer.tokbackend.guard.record["found_by"]["ids"]["contractions"])


def test_recent_code_points_class_catches_a_guard_missing_the_letter_class(hf_tokenizer):
    planted = tokbackend.accelerate(hf_tokenizer, "gigatoken")
    guard = planted.tokbackend.guard
    planted.tokbackend.guard = UnicodeGuard(guard.code_points - _letter_class(planted), guard.record)
    strategy = input_classes([])["recent_code_points"]()
    # a class name without pinned examples: the strategy alone must find it
    mismatch = find_mismatch(hf_tokenizer.encode, planted.encode, strategy, "unpinned", settings.get_profile("ci"))
    assert mismatch is not None
    assert any(ord(character) in _letter_class(planted) for character in mismatch.text)


def _hf_batch(hf_tokenizer):
    return HFBackend(hf_tokenizer.backend_tokenizer.to_str()).encode_batch


def _full_scan(hf_tokenizer, fast_tokenizer):
    from tokbackend.guard.derive import FULL_PLANES

    return scan(
        _hf_batch(hf_tokenizer),
        {
            "raw": fast_tokenizer.tokbackend.backend.encode_batch,
            "accelerated": lambda texts: fast_tokenizer(texts, add_special_tokens=False)["input_ids"],
        },
        derive_contexts(hf_tokenizer.backend_tokenizer.to_str()),
        plane_code_points(FULL_PLANES),
    )


@pytest.mark.slow
def test_every_code_point_is_exact_through_the_accelerated_tokenizer(hf_tokenizer, fast_tokenizer):
    """The full scan in every derived context (CI runs it for Qwen3.6 through `tokbackend verify`)."""
    results = _full_scan(hf_tokenizer, fast_tokenizer)
    assert results["accelerated"].all_divergent == []
    raw = set(results["raw"].all_divergent)
    guard = fast_tokenizer.tokbackend.guard
    if any(guard.by_class().get("ids", {}).values()):
        # the record's ids oracle saw wrong ids with this vocabulary: the raw backend must still
        # give some, or the record is stale
        assert raw, "the raw backend no longer diverges anywhere: the guard's records are stale"
    # else only the boundaries oracle found the class (fastokens: U+017F, which Qwen's merges
    # hide; `test_the_boundary_oracle_finds_fastokens_case_folding_difference` covers it)
    assert raw <= guard.code_points


# Guard records for the test vocabularies (derived like the shipped ones, see README "Guard records").
TEST_RECORDS = Path(__file__).parent / "guards"


@pytest.mark.slow
@pytest.mark.parametrize("vocabulary", ["llama3-split", "o200k-split"])
def test_every_code_point_is_exact_for_other_split_patterns(vocabulary, monkeypatch):
    monkeypatch.setenv(BAKED_RECORDS_ENV, str(TEST_RECORDS))
    hf = _vocabulary_tokenizer(vocabulary)
    fast = tokbackend.accelerate(hf, "gigatoken")
    results = _full_scan(hf, fast)
    assert results["accelerated"].all_divergent == []
    assert set(results["raw"].all_divergent) <= fast.tokbackend.guard.code_points


@pytest.mark.parametrize("vocabulary", ["llama3-split", "o200k-split"])
@pytest.mark.parametrize("input_class", ["recent_code_points", "contractions", "any_text", "digit_runs"])
def test_other_split_patterns_are_exact_for_boundary_classes(vocabulary, input_class, monkeypatch):
    monkeypatch.setenv(BAKED_RECORDS_ENV, str(TEST_RECORDS))
    hf = _vocabulary_tokenizer(vocabulary)
    fast = tokbackend.accelerate(hf, "gigatoken")
    strategy = input_classes([])[input_class]()
    mismatch = find_mismatch(hf.encode, fast.encode, strategy, input_class, settings.get_profile("ci"))
    assert mismatch is None, mismatch.report()
    assert fast.tokbackend.stats()["fast_texts"] > 0


_vocabularies: dict[str, object] = {}


def _vocabulary_tokenizer(name: str):
    if name not in _vocabularies:
        _vocabularies[name] = tokbackend.load_hf(str(vocabulary_dir(name)))
    return _vocabularies[name]


def test_differential_report_shows_input_ids_and_first_difference():
    mismatch = compare(lambda text: [1, 2, 3, 4], lambda text: [1, 2, 9, 4], "x\u0301", "combining_marks")
    report = mismatch.report()
    assert mismatch.first_difference == 2
    assert "'x\u0301'" in report and "[1, 2, 3, 4]" in report and "[1, 2, 9, 4]" in report and "index 2" in report


def test_find_mismatch_shrinks_to_a_minimal_example(hf_tokenizer):
    def drops_after_digits(text):
        ids = hf_tokenizer.encode(text)
        return ids[:-1] if any(character.isdigit() for character in text) else ids

    strategy = input_classes([])["digit_runs"]()
    mismatch = find_mismatch(hf_tokenizer.encode, drops_after_digits, strategy, "digit_runs", settings.get_profile("ci"))
    assert mismatch is not None
    assert len(mismatch.text) == 1 and mismatch.text.isdigit()


def test_scan_names_the_code_points_that_differ(hf_tokenizer):
    reference = _hf_batch(hf_tokenizer)
    planted = {0x00E9, 0x4E2D}

    def wrong(texts):
        return [
            ids + [0] if any(chr(code_point) in text for code_point in planted) else ids
            for text, ids in zip(texts, reference(texts))
        ]

    report = scan(
        reference,
        {"wrong": wrong},
        code_points=list(range(0x00C0, 0x0100)) + list(range(0x4E00, 0x4E40)),
        contexts=[ScanContext("a{0}", "letters")],
    )
    assert set(report["wrong"].all_divergent) == planted
    assert len(all_code_points()) == 0x110000 - 0x800


def test_decode_report_documents_why_decode_stays_on_hf(hf_tokenizer):
    cases = {case.name: case for case in decode_cases(hf_tokenizer, gigatoken_decode(hf_tokenizer))}
    assert cases["plain text with a special token"].same
    assert not cases["partial UTF-8 (first byte-token of a 4-byte character)"].same
    assert not cases["skip_special_tokens=True (backend has no such flag)"].same


def test_grammar_gate_passes_on_the_accelerated_tokenizer(hf_tokenizer, fast_tokenizer):
    result = grammar_gate(fast_tokenizer, hf_tokenizer, generations=3)
    assert result.passed, result.differences + result.failures
    assert all(json.loads(text) for text in result.generations)


# -- tokbackend verify ---------------------------------------------------------------------


def _run_cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tokbackend.cli", *arguments], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("model", ["qwen3.6", "qwen3"])
def test_verify_quick_exits_0_on_builtin_models(model, tmp_path):
    report_path = tmp_path / "report.json"
    completed = _run_cli("verify", model, "--quick", "--json", str(report_path))
    assert completed.returncode == EXIT_OK, completed.stdout + completed.stderr
    assert "quick check passed (code-point scan and grammar gate skipped)" in completed.stdout
    report = json.loads(report_path.read_text())
    assert report["exit_code"] == 0
    assert [step["name"] for step in report["steps"]][:2] == ["load", "boot probe"]
    properties = next(step for step in report["steps"] if step["name"] == "hypothesis properties")
    assert properties["data"]["backend_answered"] > 0
    assert "oracle boundaries" in report["steps"][0]["detail"]  # the guard by class and oracle


class DropsAfterDigits(GigatokenBackend):
    """A wrong backend: drops the last token of any text containing a digit."""

    name = "drops-after-digits"

    def encode_batch(self, texts):
        return [
            ids[:-1] if ids and any(ch.isdigit() for ch in text) else ids for text, ids in zip(texts, super().encode_batch(texts))
        ]

    def encode(self, text):
        return self.encode_batch([text])[0]


def test_verify_exits_1_with_a_minimal_example_on_a_wrong_backend(register_for_test):
    register_for_test("drops-after-digits", DropsAfterDigits)
    lines: list[str] = []
    report = verify_model("qwen3", backend="drops-after-digits", quick=True, announce=lines.append, progress=False)
    assert report.exit_code == EXIT_MISMATCH
    output = "\n".join(lines)
    assert "[digit_runs] input '0'" in output or "input '1'" in output
    assert "first difference at index" in output


def test_verify_exits_1_when_the_fast_path_silently_answers_nothing(monkeypatch, capsys):
    """A planted defect: every encode answered by HF and nothing counted. The ids are right, and
    a gate that only compared ids would pass."""
    monkeypatch.setattr(AccelerationState, "answer", lambda self, tokenizer, texts, add_special_tokens, limit: None)
    assert cli.main(["verify", "qwen3", "--quick", "--no-progress"]) == EXIT_MISMATCH
    assert "answered none" in capsys.readouterr().out


def _assert_the_segments_step_fails(capsys, message: str) -> None:
    """`tokbackend verify qwen3.6 --only segments` exits 1 and says `message`."""
    exit_code = cli.main(["verify", "qwen3.6", "--only", "segments", "--no-progress"])
    output = capsys.readouterr().out
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert message in output


def test_verify_exits_1_when_the_segment_cache_splits_one_character_off(monkeypatch, capsys):
    """A planted defect in the segment cache alone (the first character after an added token
    moves into the piece before it): the backend is right, the conversations step must fail."""
    from tokbackend.segments import AddedTokenSplitter

    def off_by_one(self, text, start=0):
        parts = original(self, text, start)
        for index in range(1, len(parts) - 1):
            before, after = parts[index - 1], parts[index + 1]
            if type(parts[index]) is int and type(before) is str and type(after) is str and len(after) > 1:
                parts[index - 1], parts[index + 1] = before + after[0], after[1:]
        return parts

    original = AddedTokenSplitter.split
    monkeypatch.setattr(AddedTokenSplitter, "split", off_by_one)
    _assert_the_segments_step_fails(capsys, "a conversation differs with the segment cache on")


def test_verify_exits_1_when_the_prefix_memo_drops_an_id(monkeypatch, capsys):
    """A planted defect in the prefix memo alone (the ids it remembers for a request lose their
    last one): every piece is right, the reuse of an earlier turn is not; the step must fail."""
    from tokbackend.segments import SegmentCache

    def drops_last_id(self, text, chars, chunks, replaces):
        if chunks and chunks[-1]:
            chunks = (*chunks[:-1], chunks[-1][:-1])
        original(self, text, chars, chunks, replaces)

    original = SegmentCache.remember
    monkeypatch.setattr(SegmentCache, "remember", drops_last_id)
    _assert_the_segments_step_fails(capsys, "a conversation differs with the segment cache on")


def test_verify_segments_fails_when_the_cache_answers_nothing(monkeypatch, capsys):
    """A planted defect: the cache never hits (every piece encoded afresh, so the ids are right):
    a step the cache took no part in must not pass."""
    from tokbackend.segments import SegmentCache

    monkeypatch.setattr(SegmentCache, "get", lambda self, piece: None)
    _assert_the_segments_step_fails(capsys, "no request was answered from the cache")


def test_verify_checks_the_segment_cache_on_conversations(capsys):
    assert cli.main(["verify", "qwen3.6", "--only", "segments", "--no-progress"]) == EXIT_OK
    assert re.search(r"^segment cache\s+ok\s+[\d.]+\s+conversations agree turn by turn", capsys.readouterr().out, re.MULTILINE)


def _guard_classes(record: dict) -> dict[tuple[str, ...], list[int]]:
    """The guard's code points grouped by the set of (oracle, family) that found each one."""
    flags: dict[int, set[str]] = {}
    for oracle, families in record["found_by"].items():
        for family, found in families.items():
            for code_point in from_ranges(found):
                flags.setdefault(code_point, set()).add(f"{oracle}:{family}")
    classes: dict[tuple[str, ...], list[int]] = {}
    for code_point, found_by in sorted(flags.items()):
        classes.setdefault(tuple(sorted(found_by)), []).append(code_point)
    return classes


def _qwen36_record() -> dict:
    """The record accelerate() uses for Qwen3.6 with the installed versions."""
    tokenizer_json = tokbackend.load_hf("qwen3.6").backend_tokenizer.to_str()
    record, _ = find_record("gigatoken", model_fingerprint(tokenizer_json), cache_dir(), guard_versions(("gigatoken",)))
    assert record is not None, "no guard record for Qwen3.6 with the installed versions"
    return record


@pytest.mark.parametrize(
    "guard_class",
    # every other class in CI, all of them in the thorough profile
    [
        pytest.param(flags, marks=() if index % 2 == 0 else pytest.mark.slow)
        for index, flags in enumerate(sorted(_guard_classes(_qwen36_record())))
    ],
    ids=lambda flags: "+".join(flags)[:60],
)
def test_verify_exits_1_on_a_guard_missing_any_one_class(guard_class, monkeypatch, tmp_path, capsys):
    """Remove one class of divergent code points from a correct guard: the scan must name one of them."""
    record = _qwen36_record()
    members = _guard_classes(record)[guard_class]
    trimmed = sorted(from_ranges(record["code_points"]) - set(members))
    write_record({**record, "code_points": [list(pair) for pair in ranges(trimmed)]}, tmp_path)
    monkeypatch.setenv(BAKED_RECORDS_ENV, str(tmp_path))
    sample = members[:: max(1, len(members) // 6)][:6]
    code_points = ",".join(f"U+{code_point:04X}" for code_point in sample + [0x4E00, 0x0416])
    exit_code = cli.main(
        ["verify", "qwen3.6", "--backend", "gigatoken", "--only", "scan", "--code-points", code_points, "--no-progress"]
    )
    output = capsys.readouterr().out
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert "counterexample:" in output
    assert any(f"U+{code_point:04X} in context" in output for code_point in members)


def test_verify_exits_3_when_a_grammar_engine_sees_another_vocabulary(monkeypatch, capsys):
    """A planted defect: the accelerated object reports a vocabulary with two ids swapped."""

    def swapped_vocab(self):
        vocab = dict(super(AcceleratedTokenizerMixin, self).get_vocab())
        vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
        return vocab

    monkeypatch.setattr(AcceleratedTokenizerMixin, "get_vocab", swapped_vocab, raising=False)
    exit_code = cli.main(["verify", "qwen3", "--only", "grammar", "--no-progress"])
    output = capsys.readouterr().out
    assert exit_code == EXIT_GRAMMAR, output[-3000:]
    assert "grammar gate FAILED" in output


@pytest.mark.slow  # ~4.5 min; each way it can fail is tested in CI on its own
def test_full_verify_on_qwen36_with_scan_and_grammar_gate(tmp_path):
    """The whole gate as a user runs it (every code point, grammar gate), with fewer examples."""
    report_path = tmp_path / "report.json"
    exit_code = cli.main(
        ["verify", "qwen3.6", "--backend", "gigatoken", "--profile", "dev", "--no-progress", "--json", str(report_path)]
    )
    report = json.loads(report_path.read_text())
    assert exit_code == EXIT_OK, [step for step in report["steps"] if step["status"] != "ok"]
    steps = {step["name"]: step for step in report["steps"]}
    assert steps["code-point scan"]["status"] == "ok" and steps["code-point scan"]["data"]["backend_answered"] > 0
    assert steps["code-point scan"]["data"]["raw_divergent"], "the raw backend diverges nowhere: stale guard?"
    assert steps["grammar gate"]["status"] == "ok"


def test_verify_exits_2_with_the_cause_on_a_tokenizer_the_backend_cannot_load(tmp_path):
    hf = tokbackend.load_hf("qwen3.6")  # a TokenizersBackend: reloads its tokenizer.json as saved
    hf.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    hf.save_pretrained(tmp_path)
    completed = _run_cli("verify", str(tmp_path), "--backend", "gigatoken", "--quick")
    assert completed.returncode == EXIT_UNAVAILABLE
    assert "Lowercase" in completed.stdout
    assert "cannot serve" in completed.stdout
