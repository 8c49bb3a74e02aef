"""Ids as `array('q')`, for callers that store them so (SGLang's tokenizer manager does): straight
from a backend's own buffer where it can (`encode_array`, `encode_batch_arrays`), else converted."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokbackend.backends._base import EncodeBackend

_ZERO = array("q", [0])
_ONE = array("q", [1])


def split_uint32(ids: np.ndarray, offsets: np.ndarray) -> list[array[int]]:
    """One `array('q')` per row of a flat uint32 buffer whose row `i` is `ids[offsets[i]:offsets[i + 1]]`
    (each widened into its own array in one pass: no int64 copy of the whole buffer first)."""
    return [widened(ids[start:end]) for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def widened(ids: np.ndarray) -> array[int]:
    """Numpy ids as one `array('q')`, allocated at its size and widened into in one pass."""
    row = _ZERO * len(ids)
    if len(ids):
        np.frombuffer(row, dtype=np.int64)[:] = ids
    return row


def ones_like(row: array[int]) -> array[int]:
    """An `array('q')` of ones as long as `row` (an attention mask in the array form)."""
    return _ONE * len(row)


def encode_array(backend: EncodeBackend, text: str) -> array[int]:
    """`backend`'s ids for one text as `array('q')`."""
    own = getattr(backend, "encode_array", None)
    return own(text) if own is not None else array("q", backend.encode(text))


def encode_batch_arrays(backend: EncodeBackend, texts: list[str]) -> list[array[int]]:
    """`backend`'s ids for many texts, each as `array('q')`."""
    own = getattr(backend, "encode_batch_arrays", None)
    return own(texts) if own is not None else [array("q", ids) for ids in backend.encode_batch(texts)]


def in_call_forms(backend: EncodeBackend, texts: list[str]) -> tuple[list[list[int]] | list[array[int]], ...]:
    """`backend`'s ids for `texts` in each call form a lane serves (each a path of its own in a
    backend): a batch and one text at a time, each as lists and as `array('q')`."""
    return (
        backend.encode_batch(texts),
        encode_batch_arrays(backend, texts),
        [backend.encode(text) for text in texts],
        [encode_array(backend, text) for text in texts],
    )
