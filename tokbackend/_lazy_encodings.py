"""A fast-path result: HuggingFace's `BatchEncoding`, its `tokenizers.Encoding`s made when first read.

A fast-path result holds a `_Pending` in their place: `BatchEncoding._encodings` becomes a data
descriptor when this module is imported (the one change tokbackend makes to a HuggingFace class),
computing it once into a plain `list`, so C code, pickles and copies see what HF's gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tokbackend._hf_import import suppress_torch_warning

with suppress_torch_warning():
    from transformers.tokenization_utils_base import BatchEncoding

_KEY = "_encodings"
_NEVER_SET = object()


class _Pending(functools.partial[list[Any]]):
    """What a fast-path result holds in place of its Encodings until they are read (a call makes them)."""


def _read(result: BatchEncoding) -> Any:
    values = result.__dict__
    stored = values.get(_KEY, _NEVER_SET)
    if stored is _NEVER_SET:  # never set: HF's `__getattr__` answers, as for a missing plain attribute
        raise AttributeError(_KEY)
    if type(stored) is not _Pending:
        return stored
    encodings = list(stored())  # never under a lock: it is HF's own encode
    # Two threads reading one result at once may both compute it (equal Encodings either way):
    # the pending value is replaced only while it is still there, and each returns what is stored.
    if values.get(_KEY) is stored:
        values[_KEY] = encodings
    return values[_KEY]


def _write(result: BatchEncoding, value: Any) -> None:
    result.__dict__[_KEY] = value


def _delete(result: BatchEncoding) -> None:
    try:
        del result.__dict__[_KEY]
    except KeyError:
        raise AttributeError(_KEY) from None


if not isinstance(BatchEncoding.__dict__.get(_KEY), property):  # installed once, also if reloaded
    BatchEncoding._encodings = property(
        _read, _write, _delete, "the tokenizers.Encoding list (tokbackend._lazy_encodings)"
    )  # type: ignore[assignment]  # a descriptor over HF's attribute


def lazy_batch_encoding(data: dict[str, Any], compute: Callable[[], list[Any]]) -> BatchEncoding:
    """HF's `BatchEncoding` of `data` whose Encodings `compute()` gives when first read."""
    # n_sequences: HF reads encodings[0].n_sequences, which is 1 for a text without a pair
    return BatchEncoding(data, _Pending(compute), n_sequences=1)  # type: ignore[arg-type]  # the Encodings, made when read
