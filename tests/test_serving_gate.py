"""The serving gate's judgement (`tokbackend sglang-gate`), on CPU: the prompts it sends and what
it counts as a difference. The gate itself boots real SGLang servers on a GPU host (bench/RESULTS.md,
"Live SGLang gate"); here the answers a server would give are the ids each tokenizer gives."""

from __future__ import annotations

import copy

import pytest
from defects import DropsOnLongTexts

import tokbackend
from tokbackend.integrations import _sglang_gate as gate


@pytest.fixture(scope="module")
def qwen3():
    return tokbackend.load_hf("qwen3")


def _count(hf):
    return lambda text: len(hf.backend_tokenizer.encode(text).ids)


def _answers(tokenizer, prompts):
    """What the gate reads from /generate, with the server's tokenizer standing in for the server."""
    found = {}
    for name, text in prompts.items():
        ids = tokenizer.encode(text)
        found[name] = {"prompt_tokens": len(ids), "input_ids": ids}
    return found


def test_the_probes_hold_long_prompts_added_tokens_and_pinned_inputs(qwen3):
    added = [str(token) for token in qwen3.added_tokens_decoder.values()]
    prompts = gate.probes(_count(qwen3), added, (2000, 8000))
    for tokens in (2000, 8000):
        assert abs(_count(qwen3)(prompts[f"long {tokens // 1000}k tokens"]) - tokens) <= tokens * 0.02
    assert all(token in prompts["added tokens inside text"] for token in added[:6])
    assert any(name.startswith("pinned ") for name in prompts)


def test_the_gate_finds_a_backend_that_drops_an_id_on_long_texts(qwen3, register_for_test):
    """The planted defect of the live run, on CPU: a backend the boot probe passes, serving."""
    added = [str(token) for token in qwen3.added_tokens_decoder.values()]
    prompts = gate.probes(_count(qwen3), added, (4000,))
    reference = _answers(qwen3, prompts)
    assert gate.differences(reference, _answers(tokbackend.accelerate(copy.deepcopy(qwen3), "gigatoken"), prompts)) == []
    register_for_test("drops-on-long-texts", DropsOnLongTexts)
    planted = tokbackend.accelerate(copy.deepcopy(qwen3), "drops-on-long-texts")  # the boot probe lets it through
    found = gate.differences(reference, _answers(planted, prompts))
    assert any(line.startswith("long 4k tokens: prompt_tokens differs") for line in found), found
    assert all(line.startswith("long 4k tokens") for line in found), found  # nothing else is long enough


def test_a_missing_answer_or_a_missing_field_is_a_difference():
    reference = {"a": {"prompt_tokens": 3, "input_ids": [1, 2, 3]}, "b": {"content": "x"}}
    assert gate.differences(reference, {"a": {"prompt_tokens": 3, "input_ids": [1, 2, 3]}}) == ["b: content differs"]
    assert gate.differences(reference, {"a": {"prompt_tokens": 3}, "b": {"content": "x"}})[0].startswith("a: input_ids differs")


def test_a_schema_answer_that_does_not_validate_is_named():
    assert gate._conforms('{"answer": "yes", "color": "red", "count": 3}') is None
    assert gate._conforms('{"answer": "maybe", "color": "red", "count": 3}').startswith("ValidationError")
    assert gate._conforms('{"answer": "yes"').startswith("JSONDecodeError")
