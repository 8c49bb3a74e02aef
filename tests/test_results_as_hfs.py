"""A fast-path result is HF's: its class, and what its Encodings answer after the caller edits it,
copies or pickles it, or changes the tokenizer; and an accelerated tokenizer pickles where HF's
does, whatever state it is in."""

from __future__ import annotations

import copy
import pickle

import pytest
from conftest import fast_counts
from tokenizers import normalizers
from transformers import BatchEncoding

import tokbackend
from tokbackend.equivalence.sharing import encodings_answers


@pytest.fixture(scope="module")
def plain():
    return tokbackend.load_hf("qwen3")


@pytest.fixture
def pair(plain):
    """An HF tokenizer and an accelerated one that share no Rust state (each test may change them)."""
    return copy.deepcopy(plain), tokbackend.accelerate(copy.deepcopy(plain), "gigatoken")


def test_a_result_is_of_hfs_class(pair):
    hf, accelerated = pair
    before = fast_counts(accelerated)[0]
    assert type(accelerated("hello world")) is BatchEncoding is type(hf("hello world"))
    assert type(accelerated(["a", "b"])) is BatchEncoding
    assert fast_counts(accelerated)[0] == before + 3


@pytest.mark.parametrize(
    "edit",
    [
        lambda result: result["input_ids"].append(0),
        lambda result: result["input_ids"].pop(),
        lambda result: result["input_ids"].__setitem__(0, 1),
    ],
    ids=["append", "pop", "replace"],
)
def test_a_result_edited_in_place_answers_as_hfs(pair, edit):
    hf, accelerated = pair
    answers = []
    for tokenizer in (hf, accelerated):
        result = tokenizer("hello world, again")
        edit(result)
        answers.append((result["input_ids"], *encodings_answers(result)))
    assert answers[1] == answers[0]


def test_a_result_made_before_a_change_answers_as_hfs(pair):
    """HF's Encodings are made by the call: a result keeps the tokenizer's state at the call
    (new tokens, a new normalizer), also where its ids did not change."""
    hf, accelerated = pair
    answers = []
    for tokenizer in (hf, accelerated):
        single, batch, unchanged = tokenizer("hello there world"), tokenizer(["hello there", "x y"]), tokenizer("a b")
        tokenizer.add_tokens(["there", " b"])
        tokenizer.backend_tokenizer.normalizer = normalizers.Lowercase()
        after = tokenizer("Hello THERE")
        answers.append(
            (
                encodings_answers(single),
                batch.tokens(1),
                batch.word_ids(0),
                encodings_answers(unchanged),
                encodings_answers(after),
            )
        )
    assert answers[1] == answers[0]


def test_an_accelerated_tokenizer_the_backend_cannot_serve_pickles_as_hfs(pair):
    """After a change the backend cannot load (gigatoken: an NFKC normalizer) calls go to HF;
    pickle and deepcopy must give such a tokenizer as HF's do, not raise."""
    hf, accelerated = pair
    for tokenizer in (hf, accelerated):
        tokenizer.backend_tokenizer.normalizer = normalizers.NFKC()
    expected = hf("\ufb01ne \u2460")["input_ids"]
    assert accelerated("\ufb01ne \u2460")["input_ids"] == expected
    assert not accelerated.tokbackend.fast_path_enabled
    for copied in (pickle.loads(pickle.dumps(accelerated)), copy.deepcopy(accelerated)):
        assert copied("\ufb01ne \u2460")["input_ids"] == expected
        assert isinstance(copied, type(hf)) and not copied.tokbackend.fast_path_enabled
