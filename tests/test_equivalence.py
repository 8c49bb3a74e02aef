"""The exactness harness against both built-in models, and `tokbackend verify`'s contract."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import settings
from tokenizers import normalizers

import tokbackend
from equivalence.codepoints import all_code_points, scan
from equivalence.decode_report import decode_cases, gigatoken_decode
from equivalence.differential import compare, find_mismatch
from equivalence.grammar import grammar_gate
from equivalence.strategies import input_classes
from tokbackend.backends.gigatoken import GigatokenBackend
from tokbackend.backends.hf import HFBackend
from tokbackend.verify import EXIT_MISMATCH, EXIT_OK, EXIT_UNAVAILABLE, verify_model

CLASS_NAMES = sorted(input_classes([]))


@pytest.mark.parametrize("input_class", CLASS_NAMES)
def test_accelerated_encode_equals_hf_for_every_input_class(hf_tokenizer, fast_tokenizer, input_class):
    added = [str(token) for token in hf_tokenizer.added_tokens_decoder.values()]
    strategy = input_classes(added)[input_class]()
    profile = settings.get_profile("ci")
    if input_class == "long_prompts":
        profile = settings(profile, max_examples=3)
    mismatch = find_mismatch(hf_tokenizer.encode, fast_tokenizer.encode, strategy, input_class, profile)
    assert mismatch is None, mismatch.report()


# Counterexamples the harness found once, pinned forever.
PINNED = [
    "\u00c0\u0300\u1ae6",  # NFC reorders U+1AE6 (ccc 220 in gigatoken's Unicode, 0 in HF's): found by combining_marks
    "a\U000113c2\U000113c2",  # a Unicode 16 composition pair that HF's NFC does not know: found by the code-point scan
]


@pytest.mark.parametrize("text", PINNED, ids=ascii)
def test_pinned_counterexamples_stay_exact(hf_tokenizer, fast_tokenizer, text):
    assert fast_tokenizer.encode(text) == hf_tokenizer.encode(text)
    assert fast_tokenizer.tokbackend.guard.needs_hf(text)


def _hf_batch(hf_tokenizer):
    return HFBackend(hf_tokenizer).encode_batch


def test_every_code_point_is_exact_through_the_accelerated_tokenizer(hf_tokenizer, fast_tokenizer):
    """The full scan: the raw backend diverges on some code points, the guard covers all of them."""
    results = scan(
        _hf_batch(hf_tokenizer),
        {
            "raw": fast_tokenizer.tokbackend.backend.encode_batch,
            "accelerated": lambda texts: fast_tokenizer(texts, add_special_tokens=False)["input_ids"],
        },
    )
    assert results["accelerated"].all_divergent == []
    raw = set(results["raw"].all_divergent)
    assert raw, "the raw backend no longer diverges anywhere: the guard's records are stale"
    assert raw <= fast_tokenizer.tokbackend.guard.code_points


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
        reference, {"wrong": wrong}, code_points=list(range(0x00C0, 0x0100)) + list(range(0x4E00, 0x4E40)), contexts=["a{0}"]
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
    assert "exact and usable" in completed.stdout
    report = json.loads(report_path.read_text())
    assert report["exit_code"] == 0
    assert [step["name"] for step in report["steps"]][:2] == ["load", "boot probe"]


class DropsAfterDigits(GigatokenBackend):
    """A wrong backend: drops the last token of any text containing a digit."""

    name = "drops-after-digits"

    def encode_batch(self, texts):
        return [
            ids[:-1] if ids and any(ch.isdigit() for ch in text) else ids for text, ids in zip(texts, super().encode_batch(texts))
        ]

    def encode(self, text):
        return self.encode_batch([text])[0]


def test_verify_exits_1_with_a_minimal_example_on_a_wrong_backend():
    if "drops-after-digits" not in tokbackend.available_backends():
        tokbackend.register_backend("drops-after-digits", DropsAfterDigits)
    lines: list[str] = []
    report = verify_model("qwen3", backend="drops-after-digits", quick=True, announce=lines.append, progress=False)
    assert report.exit_code == EXIT_MISMATCH
    output = "\n".join(lines)
    assert "[digit_runs] input '0'" in output or "input '1'" in output
    assert "first difference at index" in output


def test_verify_exits_2_with_the_cause_on_a_tokenizer_the_backend_cannot_load(tmp_path):
    hf = tokbackend.load_hf("qwen3.6")  # a TokenizersBackend: reloads its tokenizer.json as saved
    hf.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    hf.save_pretrained(tmp_path)
    completed = _run_cli("verify", str(tmp_path), "--quick")
    assert completed.returncode == EXIT_UNAVAILABLE
    assert "Lowercase" in completed.stdout
    assert "cannot serve" in completed.stdout


@pytest.mark.slow
def test_full_verify_on_qwen36():
    report = verify_model("qwen3.6", announce=lambda line: None, progress=False)
    assert report.exit_code == EXIT_OK, [step for step in report.steps if step.status != "ok"]
