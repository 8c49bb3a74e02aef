"""What HuggingFace leaves behind, as HuggingFace leaves it: the Rust tokenizer's per-call settings
under threads and after any sequence of calls (and so `save_pretrained`'s tokenizer.json), and
the once-per-object length warning (the checks are `tokbackend.equivalence.sharing`'s, which verify runs)."""

from __future__ import annotations

import copy
import logging

import pytest

import tokbackend
from tokbackend._tokenizer import reference_of
from tokbackend.equivalence.sharing import length_warnings, settings_left, settings_of, threads_with_truncation

# fastokens' guard hands `ſ` (U+017F) to HuggingFace: the internal call the fuzzer caught
GUARDED = "a \u017f b"


@pytest.fixture(scope="module")
def plain():
    return tokbackend.load_hf("qwen3")


def _independent(plain, backend: str = "fastokens"):
    """An HF tokenizer and an accelerated one that share no Rust state."""
    return copy.deepcopy(plain), tokbackend.accelerate(copy.deepcopy(plain), backend)


def test_truncating_calls_from_four_threads_beside_guarded_texts_are_exact(plain):
    """vLLM's pattern: every call truncates; long texts go to HF (they would be cut), guarded
    ones are handed over internally without truncation. An internal hand-over must not turn
    truncation off under another thread's truncating HF call (before: ~4% of calls wrong)."""
    hf, accelerated = _independent(plain)
    assert threads_with_truncation(hf, accelerated, GUARDED) is None
    assert accelerated.tokbackend.stats()["fallbacks"].get("unicode_guard", 0) > 0  # the internal hand-over ran


@pytest.mark.parametrize("backend", ["fastokens", "gigatoken"])
def test_settings_and_saved_file_are_what_hf_leaves_after_every_call(plain, backend):
    """Fast-path answers (plain, truncating that cuts nothing, `encode`, batches) and hand-overs
    (cuts, padding, split special tokens, guarded texts) in many orders."""
    hf, accelerated = _independent(plain, backend)
    assert settings_left(hf, accelerated, GUARDED) is None


@pytest.mark.parametrize("backend", ["fastokens", "gigatoken"])
def test_the_tokenizer_given_to_accelerate_reads_encodes_and_saves_as_hf_leaves_it(plain, backend):
    """The HF object passed to accelerate() shares its Rust tokenizer with the accelerated copy:
    after a call whose ids would be cut (HF answers it, setting truncation) and a plain call the
    backend answers, HF alone shows no truncation; the original must too, and encode and save so
    (before: its truncation stayed max_length=3, its Rust encode gave 3 ids, its saved file kept it)."""
    hf, given = copy.deepcopy(plain), copy.deepcopy(plain)
    accelerated = tokbackend.accelerate(given, backend)
    long = "one two three four five six seven"
    for tokenizer in (hf, accelerated):
        tokenizer(long, truncation=True, max_length=3)
        tokenizer.encode("hello world")
    assert given.backend_tokenizer.truncation is None is hf.backend_tokenizer.truncation
    assert given.backend_tokenizer.encode(long).ids == hf.backend_tokenizer.encode(long).ids
    assert settings_left(hf, accelerated, GUARDED, original=given) is None


def test_settings_a_loaded_tokenizer_carries_survive_accelerate(plain):
    """A tokenizer.json may carry truncation and padding: HF keeps them until its first call;
    accelerate()'s probe (internal HF calls) must not reset them."""
    hf, accelerated_from = copy.deepcopy(plain), copy.deepcopy(plain)
    for tokenizer in (hf, accelerated_from):
        tokenizer.backend_tokenizer.enable_truncation(64)
        tokenizer.backend_tokenizer.enable_padding(length=70)
    accelerated = tokbackend.accelerate(accelerated_from, "fastokens")
    assert settings_of(accelerated.backend_tokenizer) == settings_of(hf.backend_tokenizer)
    assert accelerated.backend_tokenizer.to_str() == hf.backend_tokenizer.to_str()


def test_the_rust_ids_of_the_start_up_screen_are_hfs_and_leave_the_settings_as_they_were(plain):
    """The start-up screen reads the Rust tokenizer directly (`rust_ids`): with truncation
    and padding on it, as a tokenizer.json may carry them, its ids are still the untruncated
    ones HF's plain call gives, and the settings stay what they were."""
    hf, accelerated = _independent(plain)
    accelerated.backend_tokenizer.enable_truncation(8)
    accelerated.backend_tokenizer.enable_padding(length=12)
    before = settings_of(accelerated.backend_tokenizer)
    texts = ["a longer text than eight tokens, cut by the truncation it carries", "naïve café 123"]
    reference = reference_of(accelerated)
    assert reference.rust_ids(texts) == [hf.encode(text, add_special_tokens=False) for text in texts]
    assert settings_of(accelerated.backend_tokenizer) == before


@pytest.mark.parametrize("backend", ["fastokens", "gigatoken"])
def test_length_warnings_are_hfs(plain, backend):
    """HF warns once per object, with the length of the ids it returns; internal calls (the
    guard's hand-over, a rebuild's probe after add_tokens) neither warn nor use that once up."""
    hf, accelerated = _independent(plain, backend)
    assert length_warnings(hf, accelerated, GUARDED) is None


def test_hand_overs_log_what_hfs_calls_log_without_a_pad_token(plain, caplog):
    """Without a pad token, reading it logs an error (with `verbose`); HF reads it only for a
    padding call, so a hand-over of any other call must not read it either."""
    hf, accelerated = _independent(plain)
    logged = []
    for tokenizer in (hf, accelerated):
        tokenizer.pad_token, tokenizer.verbose = None, True
        caplog.clear()
        with caplog.at_level(logging.INFO):
            tokenizer("The quick brown fox " * 300, truncation=True, max_length=8)  # HF answers: it cuts
            tokenizer(GUARDED)  # handed to HF internally
        logged.append([record.getMessage() for record in caplog.records if record.name.startswith("transformers")])
    assert logged[1] == logged[0] == []
