"""The backend registry, unusable backends, the boot probe, and bad input."""

from __future__ import annotations

import logging

import pytest
from tokenizers import normalizers

import tokbackend
from tokbackend.backends.gigatoken import GigatokenBackend
from tokbackend.state import FastPathError


class DroppingBackend(GigatokenBackend):
    """A deliberately wrong backend: loses the last token of any text containing a digit."""

    name = "dropping"

    def encode_batch(self, texts):
        return [
            ids[:-1] if any(ch.isdigit() for ch in text) and ids else ids for text, ids in zip(texts, super().encode_batch(texts))
        ]

    def encode(self, text):
        return self.encode_batch([text])[0]


def test_registry_lists_builtins_and_refuses_duplicates():
    assert {"hf", "gigatoken"} <= set(tokbackend.available_backends())
    with pytest.raises(ValueError, match="already registered"):
        tokbackend.register_backend("gigatoken", GigatokenBackend)
    with pytest.raises(ValueError, match="registered backends: .*gigatoken"):
        tokbackend.accelerate(tokbackend.load_hf("qwen3"), backend="no-such-backend")


def test_hf_backend_is_exact(hf_tokenizer):
    fast = tokbackend.accelerate(hf_tokenizer, backend="hf")
    text = "<|im_start|>x 123 毕老师<think>"
    assert fast.encode(text) == hf_tokenizer.encode(text)
    assert fast.tokbackend.stats()["fast_texts"] == 1


def test_probe_turns_a_wrong_backend_off(fresh_pair, caplog, register_for_test):
    register_for_test("dropping", DroppingBackend)
    hf, _ = fresh_pair
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, backend="dropping")
    assert not fast.tokbackend.fast_path_enabled
    assert any("disagrees with HuggingFace" in record.getMessage() for record in caplog.records)
    text = "room 101"
    assert fast.encode(text) == hf.encode(text)  # served by HF, so still exact
    assert fast.tokbackend.stats()["fallbacks"]["fast_path_disabled"] == 1


def test_probe_raises_in_strict_mode(fresh_pair, register_for_test):
    register_for_test("dropping", DroppingBackend)
    hf, _ = fresh_pair
    with pytest.raises(FastPathError, match="dropping.*disagrees"):
        tokbackend.accelerate(hf, backend="dropping", strict=True)


def test_unloadable_tokenizer_raises_a_clear_error(fresh_pair, caplog):
    hf, _ = fresh_pair
    hf.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    with pytest.raises(tokbackend.BackendUnavailableError, match="gigatoken.*cannot serve.*allow_hf_fallback"):
        tokbackend.accelerate(hf, "gigatoken")
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, "gigatoken", allow_hf_fallback=True)
    assert not fast.tokbackend.fast_path_enabled
    assert fast.encode("HeLLo") == hf.encode("HeLLo") == hf.encode("hello")


def test_slow_or_foreign_objects_are_refused():
    with pytest.raises(TypeError, match="transformers tokenizer"):
        tokbackend.accelerate("qwen3")


BAD_INPUTS = [None, 1, b"bytes", "lone \ud800 surrogate", ["ok", None], [], 3.5]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=repr)
@pytest.mark.parametrize("method", ["encode", "__call__"])
def test_bad_input_raises_what_hf_raises(hf_tokenizer, fast_tokenizer, bad, method):
    with pytest.raises(BaseException) as theirs:
        getattr(hf_tokenizer, method)(bad)
    with pytest.raises(BaseException) as ours:
        getattr(fast_tokenizer, method)(bad)
    assert type(ours.value) is type(theirs.value)
    assert isinstance(ours.value, Exception)


def test_rust_panics_become_ordinary_exceptions(fast_tokenizer):
    """A real gigatoken panic (decode of an out-of-range id) raised inside the backend's call
    wrapper comes out as BackendPanicError, an Exception, not pyo3's BaseException."""
    import gigatoken

    from tokbackend.backends.base import BackendPanicError
    from tokbackend.backends.gigatoken import GigatokenBackend

    tokenizer_json = fast_tokenizer.backend_tokenizer.to_str()
    rust = gigatoken.Tokenizer.from_json(tokenizer_json).backend

    class Panicking:
        def encode_batch_list(self, texts, parallel):
            return rust.decode([10**9])

    backend = GigatokenBackend(tokenizer_json, GigatokenBackend.options_for_scanning())
    backend._rust = Panicking()
    with pytest.raises(BackendPanicError, match="panicked"):
        backend.encode("x")


def test_out_of_range_ids_decode_as_hf_does(hf_tokenizer, fast_tokenizer):
    ids = [10**9]
    try:
        expected = hf_tokenizer.decode(ids)
    except Exception as error:  # whatever HF does, the accelerated tokenizer does the same
        with pytest.raises(type(error)):
            fast_tokenizer.decode(ids)
    else:
        assert fast_tokenizer.decode(ids) == expected
