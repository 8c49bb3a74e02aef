"""The `BatchEncoding` a fast-path call returns: as rich as HuggingFace's, at no cost when unused.

HF's result of a fast tokenizer carries `tokenizers.Encoding`s besides the ids: `is_fast`,
`n_sequences`, `encodings`, `enc[0]`, `tokens()`, `word_ids()`, `char_to_token()`, offsets (which
`apply_chat_template(..., return_assistant_tokens_mask=True)` reads). The fast path has only ids.
`LazyBatchEncoding` is a `BatchEncoding` whose Encodings HuggingFace computes, by the same call,
the first time anything asks for them; reading the ids, `dict(enc)`, `is_fast`, `n_sequences` or
converting to tensors computes nothing. The computed Encodings are checked against the fast
path's ids (a tokenizer changed in between raises instead of handing out Encodings that disagree
with `input_ids`). Pickles and deep copies are plain `BatchEncoding`s, as HF's are.
"""

from __future__ import annotations

import copyreg
import threading
from collections.abc import Callable
from typing import Any

from tokbackend.hf_import import without_the_torch_advisory

with without_the_torch_advisory():
    from transformers.tokenization_utils_base import BatchEncoding


class _Encodings:
    """Computes the Encodings once (`compute()`, HF's own call), shared by shallow copies."""

    __slots__ = ("_compute", "_expected", "_value", "_lock")

    def __init__(self, compute: Callable[[], list], expected: list[list[int]]) -> None:
        self._compute, self._expected, self._value = compute, expected, None
        self._lock = threading.Lock()

    def get(self) -> list:
        if self._compute is None:
            return self._value
        with self._lock:
            if self._compute is not None:
                try:
                    value = self._compute()
                except AttributeError as error:  # BatchEncoding.__getattr__ would hide it as AttributeError('_encodings')
                    raise RuntimeError(f"tokbackend: computing HuggingFace's Encodings failed: {error!r}") from error
                if len(value) != len(self._expected) or any(e.ids != list(ids) for e, ids in zip(value, self._expected)):
                    raise RuntimeError(
                        "tokbackend: HuggingFace's Encodings for this call disagree with its input_ids (the tokenizer "
                        "changed between the call and the first use of its Encodings)"
                    )
                self._value, self._compute, self._expected = value, None, None
        return self._value


class LazyBatchEncoding(BatchEncoding):
    """A `BatchEncoding` of fast-path ids whose Encodings `compute()` gives on first use."""

    @classmethod
    def of(cls, data: dict[str, Any], ids: list[list[int]], compute: Callable[[], list]) -> LazyBatchEncoding:
        # n_sequences: HF reads encodings[0].n_sequences, which is 1 for a text without a pair
        encoding = cls(data, n_sequences=1)
        encoding.__dict__["_lazy"] = _Encodings(compute, ids)
        return encoding

    # BatchEncoding.__init__ and __setstate__ assign self._encodings, and every method reads it:
    # a data descriptor takes precedence over the instance dict and BatchEncoding.__getattr__.
    @property
    def _encodings(self):
        namespace = self.__dict__
        lazy = namespace.get("_lazy")
        return lazy.get() if lazy is not None else namespace.get("_encodings_value")

    @_encodings.setter
    def _encodings(self, value) -> None:
        self.__dict__["_encodings_value"] = value
        self.__dict__["_lazy"] = None

    @property
    def is_fast(self) -> bool:
        namespace = self.__dict__
        return namespace.get("_lazy") is not None or namespace.get("_encodings_value") is not None

    def __reduce_ex__(self, protocol):
        # The plain BatchEncoding HF's result pickles to (its __getstate__: data and encodings);
        # a process without tokbackend can load it.
        return (copyreg._reconstructor, (BatchEncoding, object, None), {"data": self.data, "encodings": self._encodings})


LazyBatchEncoding.__name__ = LazyBatchEncoding.__qualname__ = "BatchEncoding"
