"""The exactness harness: every input class exact on the built-in models, pinned counterexamples,
reports that show the difference, shrinking, the grammar gate, and why decode stays on HF."""

from __future__ import annotations

import json

import pytest
from hypothesis import settings
from hypothesis import strategies as st

from tokbackend.equivalence.decode_report import decode_cases, gigatoken_decode
from tokbackend.equivalence.differential import compare, find_mismatch
from tokbackend.equivalence.grammar import grammar_gate
from tokbackend.equivalence.strategies import EXAMPLES, input_classes

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
    mismatch = find_mismatch(
        hf_tokenizer.encode, wrong_on_the_pinned_example, st.just("x"), "recent_code_points", profile
    )
    assert mismatch is not None and mismatch.text == pinned


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
    mismatch = find_mismatch(
        hf_tokenizer.encode, drops_after_digits, strategy, "digit_runs", settings.get_profile("ci")
    )
    assert mismatch is not None
    assert len(mismatch.text) == 1 and mismatch.text.isdigit()


def test_decode_report_documents_why_decode_stays_on_hf(hf_tokenizer):
    cases = {case.name: case for case in decode_cases(hf_tokenizer, gigatoken_decode(hf_tokenizer))}
    assert cases["plain text with a special token"].same
    assert not cases["partial UTF-8 (first byte-token of a 4-byte character)"].same
    assert not cases["skip_special_tokens=True (backend has no such flag)"].same


def test_grammar_gate_passes_on_the_accelerated_tokenizer(hf_tokenizer, fast_tokenizer):
    result = grammar_gate(fast_tokenizer, hf_tokenizer, generations=3)
    assert result.passed, result.differences + result.failures
    assert all(json.loads(text) for text in result.generations)
