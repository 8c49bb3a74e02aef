"""What HuggingFace leaves behind, as HuggingFace leaves it: the Rust tokenizer's per-call settings
under threads and after any sequence of calls (and so `save_pretrained`'s tokenizer.json), and
the once-per-object length warning."""

from __future__ import annotations

import copy
import logging
import threading

import pytest
from conftest import LONG

import tokbackend
from equivalence.corpus import prompt_text
from tokbackend.shared_settings import read

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
    truncation off under another thread's truncating HF call (today: ~4% of calls wrong)."""
    hf, accelerated = _independent(plain)
    texts = [text for seed in range(4) for text in (prompt_text(seed, 3000, "prose"), f"{GUARDED} {seed}")]
    expected = [hf(text, truncation=True, max_length=16)["input_ids"] for text in texts]
    start, wrong, errors = threading.Barrier(4), [], []

    def worker(offset: int) -> None:
        start.wait()
        try:
            for call in range(320):
                index = (offset + call) % len(texts)
                ids = accelerated(texts[index], truncation=True, max_length=16)["input_ids"]
                if ids != expected[index]:
                    wrong.append((index, len(ids)))
        except BaseException as error:  # noqa: BLE001 - any error fails the test
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(thread.is_alive() for thread in threads), "deadlock or stall"
    assert not errors, errors[:3]
    assert not wrong, f"{len(wrong)} of 1280 wrong, e.g. {wrong[:5]}"
    assert accelerated.tokbackend.stats()["fallbacks"].get("unicode_guard", 0) > 0  # the internal hand-over ran


# Each step is one call, made the same way on HF and on the accelerated tokenizer; they cover
# fast-path answers (plain, truncating that cuts nothing, batches, `encode`) and hand-overs
# (a cut, padding, split special tokens, a guarded text).
_STEPS = [
    ("cut", lambda t: t(LONG, truncation=True, max_length=8)),
    ("fits", lambda t: t("hello world", truncation=True, max_length=8)),
    ("plain", lambda t: t("hello world")),
    ("padding", lambda t: t("hello", padding="max_length", max_length=300)),
    ("encode", lambda t: t.encode("hello world")),
    ("split", lambda t: t("<|im_start|>hi", split_special_tokens=True)),
    ("batch fits", lambda t: t(["a b", "c"], truncation=True, max_length=20)),
    ("guarded", lambda t: t(GUARDED)),
    ("guarded fits", lambda t: t(GUARDED, truncation=True, max_length=30)),
    ("left", lambda t: t("hello world", truncation="only_first", max_length=12)),
    ("tokenize", lambda t: t.tokenize("hello")),
]


@pytest.mark.parametrize("backend", ["fastokens", "gigatoken"])
def test_settings_and_saved_file_are_what_hf_leaves_after_every_call(plain, backend, tmp_path):
    hf, accelerated = _independent(plain, backend)
    assert read(accelerated.backend_tokenizer) == read(hf.backend_tokenizer), "after accelerate()"
    order = [*range(len(_STEPS)), *range(len(_STEPS) - 1, -1, -1), 0, 7, 1, 7, 4, 3, 2, 8, 5, 9]
    for index in order:
        name, step = _STEPS[index]
        step(hf)
        step(accelerated)
        assert read(accelerated.backend_tokenizer) == read(hf.backend_tokenizer), f"after {name!r}"
    for tokenizer, folder in ((hf, tmp_path / "hf"), (accelerated, tmp_path / "ours")):
        _STEPS[1][1](tokenizer)  # the last call the fast path answers: truncation left on
        tokenizer.save_pretrained(folder)
    assert (tmp_path / "ours" / "tokenizer.json").read_bytes() == (tmp_path / "hf" / "tokenizer.json").read_bytes()


def test_settings_a_loaded_tokenizer_carries_survive_accelerate(plain):
    """A tokenizer.json may carry truncation and padding: HF keeps them until its first call;
    accelerate()'s probe (internal HF calls) must not reset them."""
    hf, accelerated_from = copy.deepcopy(plain), copy.deepcopy(plain)
    for tokenizer in (hf, accelerated_from):
        tokenizer.backend_tokenizer.enable_truncation(64)
        tokenizer.backend_tokenizer.enable_padding(length=70)
    accelerated = tokbackend.accelerate(accelerated_from, "fastokens")
    assert read(accelerated.backend_tokenizer) == read(hf.backend_tokenizer)
    assert accelerated.backend_tokenizer.to_str() == hf.backend_tokenizer.to_str()


def _length_warnings(caplog, tokenizer, calls) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        for call in calls:
            call(tokenizer)
    return [record.getMessage() for record in caplog.records if "sequence length is longer" in record.getMessage()]


@pytest.mark.parametrize("backend", ["fastokens", "gigatoken"])
def test_length_warnings_are_hfs(plain, backend, caplog):
    """HF warns once per object, with the length of the ids it returns; internal calls (the
    guard's hand-over, a rebuild's probe after add_tokens) neither warn nor use that once up."""
    hf, accelerated = _independent(plain, backend)
    calls = [
        lambda t: t(GUARDED * 3),  # a guarded piece handed over internally: silent on HF
        lambda t: t.add_tokens(["<extra_28>"]),  # a rebuild and its probe on the next call
        lambda t: t("short"),
        lambda t: t.encode(f"{GUARDED} " + "word " * 20),  # the user's overflow: HF warns here
        lambda t: t.encode("word " * 40),  # and only once
    ]
    for tokenizer in (hf, accelerated):
        tokenizer.model_max_length = 16
    expected = _length_warnings(caplog, hf, calls)
    assert len(expected) == 1
    assert _length_warnings(caplog, accelerated, calls) == expected
