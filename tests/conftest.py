"""Shared fixtures: the two built-in models, plain and accelerated (built once per session)."""

from __future__ import annotations

import copy

import pytest

import tokbackend

BUILTIN_MODELS = ("qwen3.6", "qwen3")


@pytest.fixture(scope="session", params=BUILTIN_MODELS)
def model_name(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def hf_tokenizer(model_name):
    """The plain HuggingFace tokenizer; tests must not mutate it (use `fresh_pair`)."""
    return tokbackend.load_hf(model_name)


@pytest.fixture(scope="session")
def fast_tokenizer(hf_tokenizer):
    """The accelerated tokenizer over `hf_tokenizer`; tests must not mutate it."""
    return tokbackend.accelerate(hf_tokenizer)


@pytest.fixture
def fresh_pair():
    """An independent (hf, accelerated) Qwen3 pair for tests that add tokens or change state."""
    hf = copy.deepcopy(_qwen3_template())
    return hf, tokbackend.accelerate(hf)


_template = {}


def _qwen3_template():
    if "qwen3" not in _template:
        _template["qwen3"] = tokbackend.load_hf("qwen3")
    return _template["qwen3"]


def fast_counts(tokenizer) -> tuple[int, dict[str, int]]:
    stats = tokenizer.tokbackend.stats()
    return stats["fast_texts"], stats["fallbacks"]
