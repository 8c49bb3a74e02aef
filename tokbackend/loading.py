"""`tokbackend.load()`: find a tokenizer (built-in name, local directory, local HF cache) and accelerate it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tokbackend.cache import cache_dir
from tokbackend.models.qwen import BUILTIN_MODELS, builtin_model_dir
from tokbackend.split import accelerate

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DEFAULT_MODEL = "qwen3.6"


def resolve_model(name_or_path: str) -> str:
    """A built-in name becomes its (built on first use) directory; anything else is returned as is."""
    if name_or_path in BUILTIN_MODELS:
        return str(builtin_model_dir(name_or_path, cache_dir()))
    return name_or_path


def load_hf(name_or_path: str, **from_pretrained_kwargs: Any) -> PreTrainedTokenizerBase:
    """The plain HuggingFace tokenizer for a built-in name, a directory or a cached hub id."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(name_or_path), **from_pretrained_kwargs)


def load(name_or_path: str = DEFAULT_MODEL, backend: str = "gigatoken", **from_pretrained_kwargs: Any) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained` + `accelerate`. Built-in names: "qwen3.6", "qwen3".

    >>> tokenizer = load("qwen3.6")  # doctest: +SKIP
    >>> tokenizer.encode("Hello!")  # doctest: +SKIP
    [9419, 0]
    """
    accelerate_options = {
        key: from_pretrained_kwargs.pop(key)
        for key in ("strict", "probe", "allow_hf_fallback", "unicode_guard", "cache_budget_mib")
        if key in from_pretrained_kwargs
    }
    return accelerate(load_hf(name_or_path, **from_pretrained_kwargs), backend=backend, **accelerate_options)
