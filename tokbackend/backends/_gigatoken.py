"""The gigatoken backend: SIMD BPE encode in Rust, on a shared rayon pool for batches and long texts.

Every call goes through the batch entry points (its single-text `encode` borrows the tokenizer
mutably and raises "Already borrowed" under concurrency). Its caches grow without bound (served
through `RenewingBackend`) and are per thread, so `prepare()` warms every pool thread.
"""

from __future__ import annotations

import dataclasses
import math
import os
from array import array
from typing import TYPE_CHECKING, Any

import numpy as np

from tokbackend._process.forking import in_forked_child
from tokbackend.backends._arrays import split_uint32, widened
from tokbackend.backends._base import PanicConverter, import_library, loading_tokenizer_json
from tokbackend.backends._warmup import builtin_texts

if TYPE_CHECKING:
    from gigatoken.gigatoken_rs import BPETokenizer, SentencePieceTokenizer

# made once: it keeps no state
_PANICS = PanicConverter("gigatoken")
# A text this long is encoded on the pool even alone (its pieces in parallel, the same ids):
# below it, handing work to the pool costs about what it saves.
PARALLEL_CHARS = 16_384
# Built-in text each pool thread encodes while the backend is prepared, enough to warm a thread's
# cache of pieces (bench/RESULTS.md has the measurement).
_WARM_CHARS_PER_THREAD = 2_000_000


def pool_threads() -> int:
    """The threads of gigatoken's rayon pool: RAYON_NUM_THREADS where set, else the usable CPUs."""
    configured = os.environ.get("RAYON_NUM_THREADS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _parallel(texts: list[str]) -> bool:
    """Whether a call goes to the pool: several texts, or one long one; never in a forked child."""
    return (len(texts) > 1 or (len(texts) == 1 and len(texts[0]) >= PARALLEL_CHARS)) and not in_forked_child()


@dataclasses.dataclass(frozen=True)
class GigatokenOptions:
    """warm: `prepare()` encodes built-in text on each thread of gigatoken's pool."""

    warm: bool = True


class GigatokenBackend:
    """Plain-text encode through gigatoken, loaded from the tokenizer's own tokenizer.json."""

    Options = GigatokenOptions
    name = "gigatoken"
    is_reference = False
    needs_unicode_guard = True  # ICU4X's Unicode tables are newer than HF tokenizers'
    versioned_libraries = ("gigatoken",)
    # records describe the library's Unicode tables: subclasses under other names share them
    guard_family = "gigatoken"
    auto_preference = 20  # after fastokens: its caches need renewals and it holds the GIL
    # its batch calls import awkward on first use, and awkward's first conversion numpy.ma
    preloads = ("gigatoken", "awkward", "numpy.ma")
    grows_without_bound = True

    def __init__(self, tokenizer_json: str, options: GigatokenOptions = GigatokenOptions()) -> None:
        gigatoken = import_library("gigatoken", "gigatoken>=0.10,<0.11")
        with loading_tokenizer_json("gigatoken"):
            self._rust: BPETokenizer | SentencePieceTokenizer = gigatoken.Tokenizer.from_json(tokenizer_json).backend
        # how one text comes back as one row of a matrix (a single row is never padded)
        self._one_row = gigatoken.gigatoken_rs.PadTruncate(0)
        self._warm = options.warm

    @classmethod
    def options_for_scanning(cls) -> GigatokenOptions:
        return GigatokenOptions(warm=False)

    def encode(self, text: str) -> list[int]:
        try:
            return self._rust.encode_batch_list([text], parallel=len(text) >= PARALLEL_CHARS and not in_forked_child())[
                0
            ]
        except BaseException as error:
            raise _PANICS.converted(error) from None

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        with _PANICS:
            return self._rust.encode_batch_list(texts, parallel=_parallel(texts))

    def encode_array(self, text: str) -> array[int]:
        # the padded form's one row: no awkward array built and taken apart for a single text
        with _PANICS:
            matrix, lengths = self._rust.encode_batch_padded([text], self._one_row, parallel=_parallel([text]))
        return widened(matrix[0, : lengths[0]])

    def encode_batch_arrays(self, texts: list[str]) -> list[array[int]]:
        with _PANICS:
            result = self._rust.encode_batch(texts, parallel=_parallel(texts))
        layout = getattr(result, "layout", None)
        if layout is not None:
            # one flat uint32 buffer and its offsets (an awkward array's layout): no Python ints
            return split_uint32(np.asarray(layout.content.data), np.asarray(layout.offsets.data))
        if type(result) is list and all(type(row) is np.ndarray for row in result):
            # where `import awkward` fails, gigatoken answers one uint32 array per text
            return [widened(row) for row in result]
        raise TypeError(
            f"tokbackend: gigatoken's encode_batch returned {type(result).__name__}, neither an awkward array "
            f"nor a list of "
            "numpy arrays; check that `python -c 'import awkward'` works (pip install awkward) and that "
            "gigatoken is 0.10"
        )

    def stats(self) -> dict[str, Any]:
        return {}

    def prepare(self) -> None:
        if self._warm and not in_forked_child():
            # the pool hands each thread a contiguous run of the batch: each meets its share
            texts = list(builtin_texts())
            chars = sum(map(len, texts))
            self.encode_batch(texts * math.ceil(pool_threads() * _WARM_CHARS_PER_THREAD / chars))
