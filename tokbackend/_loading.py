"""`tokbackend.load()`: find a tokenizer (built-in name, local directory, local HF cache) and accelerate it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokbackend._cache_dir import cache_dir
from tokbackend._errors import TokbackendError
from tokbackend._models.qwen import BUILTIN_MODELS, model_dir
from tokbackend._options import AccelerationOptions
from tokbackend._tokenizer import accelerate

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DEFAULT_MODEL = "qwen3.6"


def resolve_model(name_or_path: str) -> str:
    """A built-in name becomes its (built on first use) directory; anything else is returned as is."""
    if name_or_path in BUILTIN_MODELS:
        return str(model_dir(BUILTIN_MODELS[name_or_path], cache_dir()))
    return name_or_path


class ModelNotFoundError(TokbackendError, OSError):
    """The model is not built in, not a local directory, and not in the local HuggingFace cache.
    `cli_message` is the message for `tokbackend` commands."""

    def __init__(self, message: str, cli_message: str | None = None) -> None:
        super().__init__(message)
        self.cli_message = cli_message or message.removeprefix("tokbackend: ")


class ModelFilesError(TokbackendError, ValueError):
    """A tokenizer file HuggingFace cannot read: the message names the file and the cause."""


# What a tokenizer directory holds at least one of, and every JSON file HF may read from it.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json")
JSON_FILES = (*TOKENIZER_FILES, "special_tokens_map.json", "added_tokens.json")


def _not_found(name_or_path: str, resolved: str) -> ModelNotFoundError | None:
    """Why `resolved` cannot be loaded without the network, or None when it can be tried."""
    path = Path(resolved).expanduser()
    if path.is_file():
        return ModelNotFoundError(
            f"tokbackend: {name_or_path!r} is a file, not a tokenizer directory: pass the directory that holds it"
            f" ({path.absolute().parent})"
        )
    if path.is_dir():
        if any((path / name).is_file() for name in TOKENIZER_FILES):
            return None
        files = ", ".join(TOKENIZER_FILES)
        return ModelNotFoundError(f"tokbackend: directory {name_or_path!r} holds no tokenizer (none of {files})")
    from huggingface_hub.utils import HFValidationError, validate_repo_id  # type: ignore[attr-defined]  # a lazy module: mypy sees no re-exports

    # a directory rather than a hub id ("name" or "org/name"): it starts with ".", "/" or "~", holds
    # more than one "/" (or this system's other separator), or is no valid hub id
    path_like = (
        name_or_path.startswith((".", "/", "~"))
        or name_or_path.count("/") > 1
        or (os.sep != "/" and os.sep in name_or_path)
    )
    try:
        validate_repo_id(name_or_path)
    except HFValidationError:
        path_like = True
    if path_like:
        return ModelNotFoundError(f"tokbackend: directory {name_or_path!r} does not exist ({path.absolute()})")
    if any(_cached_file(resolved, name) is not None for name in ("tokenizer.json", "tokenizer_config.json")):
        return None
    where = (
        f"{name_or_path!r} is not a built-in model ({', '.join(BUILTIN_MODELS)}), not a local directory, "
        "and not in the local HuggingFace cache. Put its tokenizer into the cache on a machine with network access "
        f"(`hf download {name_or_path} --include 'tokenizer*'`; HF_HOME says where the cache is), or pass a "
        f"local directory"
    )
    return ModelNotFoundError(
        f"tokbackend: {where}, or pass local_files_only=False to let transformers download it.",
        cli_message=f"{where} (the `tokbackend` commands download nothing).",
    )


def load_hf(name_or_path: str, **from_pretrained_kwargs: Any) -> PreTrainedTokenizerBase:
    """The plain HuggingFace tokenizer for a built-in name, a directory (or a tokenizer.json in it) or a
    cached hub id; nothing is downloaded unless `local_files_only=False`. Raises `ModelNotFoundError`
    (saying how to put the model into the cache) and `ModelFilesError` (naming the file HF cannot parse)."""
    from transformers import AutoTokenizer

    resolved = resolve_model(name_or_path)
    given = Path(resolved).expanduser()
    if given.name in TOKENIZER_FILES and given.is_file():
        resolved = str(given.parent)
    from_pretrained_kwargs.setdefault("local_files_only", True)
    if from_pretrained_kwargs["local_files_only"]:
        missing = _not_found(name_or_path, resolved)
        if missing is not None:
            raise missing
    target = str(Path(resolved).expanduser()) if resolved.startswith("~") else resolved
    try:
        return AutoTokenizer.from_pretrained(target, **from_pretrained_kwargs)
    except Exception as error:
        damaged = _damaged_file(target)
        if damaged is None:
            raise
        raise ModelFilesError(f"tokbackend: HuggingFace cannot load {name_or_path!r}: {damaged}") from error


def _damaged_file(target: str) -> str | None:
    """'FILE is not valid JSON (CAUSE)' for the first of the tokenizer's JSON files that does not parse."""
    import json

    for name in JSON_FILES:
        path = Path(target) / name if Path(target).is_dir() else _cached_file(target, name)
        if path is None or not path.is_file():
            continue
        try:
            json.loads(path.read_bytes())
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
            return (
                f"{path} is not valid JSON ({error}); the file is damaged or cut short: restore it from the "
                f"model's source"
            )
    return None


def _cached_file(repo_id: str, filename: str) -> Path | None:
    """The local HF cache's copy of `filename` for `repo_id`, if it holds one (no network)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, filename)
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


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
