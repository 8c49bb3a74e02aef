"""`tokbackend.load()`: find a tokenizer (built-in name, local directory, local HF cache) and accelerate it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokbackend.cache import cache_dir
from tokbackend.models.qwen import BUILTIN_MODELS, builtin_model_dir
from tokbackend.options import AccelerationOptions
from tokbackend.tokenizer import accelerate

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DEFAULT_MODEL = "qwen3.6"


def resolve_model(name_or_path: str) -> str:
    """A built-in name becomes its (built on first use) directory; anything else is returned as is."""
    if name_or_path in BUILTIN_MODELS:
        return str(builtin_model_dir(name_or_path, cache_dir()))
    return name_or_path


class ModelNotFoundError(OSError):
    """The model is not built in, not a local directory, and not in the local HuggingFace cache."""


def load_hf(name_or_path: str, **from_pretrained_kwargs: Any) -> PreTrainedTokenizerBase:
    """The plain HuggingFace tokenizer for a built-in name, a directory or a cached hub id.

    Nothing is downloaded unless `local_files_only=False` is passed: a serving process must not
    wait on a network it may not reach. A model that is not found locally raises
    `ModelNotFoundError` saying how to put it into the cache.
    """
    from transformers import AutoTokenizer

    resolved = resolve_model(name_or_path)
    from_pretrained_kwargs.setdefault("local_files_only", True)
    if from_pretrained_kwargs["local_files_only"] and not Path(resolved).is_dir() and not _in_hf_cache(resolved):
        raise ModelNotFoundError(
            f"tokbackend: {name_or_path!r} is not a built-in model ({', '.join(BUILTIN_MODELS)}), not a local directory, "
            "and not in the local HuggingFace cache. Put its tokenizer into the cache on a machine with network access "
            f"(`hf download {name_or_path} --include 'tokenizer*'`), pass a local directory, or pass local_files_only=False "
            "to let transformers download it."
        )
    return AutoTokenizer.from_pretrained(resolved, **from_pretrained_kwargs)


def _in_hf_cache(repo_id: str) -> bool:
    """Whether the local HuggingFace cache holds a tokenizer file for `repo_id` (no network)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return any(
            isinstance(try_to_load_from_cache(repo_id, filename), str) for filename in ("tokenizer.json", "tokenizer_config.json")
        )
    except ValueError:  # not a valid repo id
        return False


def load(
    name_or_path: str = DEFAULT_MODEL,
    backend: str | None = None,
    *,
    options: AccelerationOptions | None = None,
    **kwargs: Any,
) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained` + `accelerate`. Built-in names: "qwen3.6", "qwen3".

    Keyword arguments named like `AccelerationOptions` fields (strict, probe, ...) go to
    `accelerate()`; the rest to `from_pretrained`.

    >>> tokenizer = load("qwen3.6")  # doctest: +SKIP
    >>> tokenizer.encode("Hello!")  # doctest: +SKIP
    [9419, 0]
    """
    changes = {key: kwargs.pop(key) for key in AccelerationOptions.field_names() & kwargs.keys()}
    return accelerate(load_hf(name_or_path, **kwargs), backend, options=options, **changes)
