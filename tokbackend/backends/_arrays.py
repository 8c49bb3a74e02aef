"""Ids as `array('q')`, for callers that store them so (SGLang's tokenizer manager turns every
prompt into `array("q", input_ids)` before it goes to the scheduler).

A backend may answer in that form straight from its own buffer (`encode_array`,
`encode_batch_arrays`: gigatoken's and fastokens' uint32 buffers, widened once), which skips the
Python ints a list would need and that the caller would throw away; for one that cannot,
`encode_array` and `encode_batch_arrays` below convert its lists. Both give the same ids.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokbackend.backends._base import EncodeBackend


_ZERO = array("q", [0])


def split_uint32(ids: np.ndarray, offsets: np.ndarray) -> list[array[int]]:
    """One `array('q')` per row of a flat uint32 buffer whose row `i` is `ids[offsets[i]:offsets[i + 1]]`.
    Each row is allocated at its size and widened into in one pass (no int64 copy of the whole
    buffer first: that and a byte copy per row cost 3-10x as much for 40 x 34k ids)."""
    return [widened(ids[start:end]) for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def widened(ids: np.ndarray) -> array[int]:
    """Numpy ids as one `array('q')`, allocated at its size and widened into in one pass."""
    row = _ZERO * len(ids)
    if len(ids):
        np.frombuffer(row, dtype=np.int64)[:] = ids
    return row


def little_endian_uint32(buffer: bytes) -> np.ndarray:
    """A little-endian uint32 buffer as numpy ids (widening converts the byte order where needed)."""
    return np.frombuffer(buffer, dtype="<u4")


def ones_like(row: array[int]) -> array[int]:
    """An `array('q')` of ones as long as `row` (an attention mask in the array form)."""
    return _ONE * len(row)


_ONE = array("q", [1])


def encode_array(backend: EncodeBackend, text: str) -> array[int]:
    """`backend`'s ids for one text as `array('q')`."""
    own = getattr(backend, "encode_array", None)
    return own(text) if own is not None else array("q", backend.encode(text))


def encode_batch_arrays(backend: EncodeBackend, texts: list[str]) -> list[array[int]]:
    """`backend`'s ids for many texts, each as `array('q')`."""
    own = getattr(backend, "encode_batch_arrays", None)
    return own(texts) if own is not None else [array("q", ids) for ids in backend.encode_batch(texts)]
