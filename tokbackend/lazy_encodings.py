"""The `BatchEncoding` a fast-path call returns: HuggingFace's class, its Encodings made when first used.

HF's result of a fast tokenizer carries `tokenizers.Encoding`s besides the ids: `is_fast`,
`n_sequences`, `encodings`, `enc[0]`, `tokens()`, `word_ids()`, `char_to_token()`, offsets (which
`apply_chat_template(..., return_assistant_tokens_mask=True)` reads). The fast path has only ids.
Its result is a plain `BatchEncoding` (`type(result) is BatchEncoding`, as users check) whose
Encodings are a `LazyEncodings`: a list that fills itself, by `compute()`, the first time anything
reads it; reading the ids, `dict(enc)`, `is_fast`, `n_sequences` or converting to tensors reads
nothing. `compute()` gives the Encodings of the call as the tokenizer stood when it was made
(`tokbackend.tokenizer`), so they stay HF's after the user edits the id lists in place or changes
the tokenizer. Pickles and deep copies hold a plain list, as HF's do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tokbackend.backends.forking import fork_safe_lock
from tokbackend.hf_import import without_the_torch_advisory

with without_the_torch_advisory():
    from transformers.tokenization_utils_base import BatchEncoding


# Held only to put computed Encodings in place, never around `compute()` (HF's own encode): two
# threads reading one result at once may both compute it, and the first to finish fills it.
_filling_lock = fork_safe_lock(sys.modules[__name__], "_filling_lock")


class LazyEncodings(list):
    """A list of Encodings that `compute()` gives on first use; see the module docstring."""

    __slots__ = ("_compute",)

    def __init__(self, compute: Callable[[], list]) -> None:
        super().__init__()
        self._compute: Callable[[], list] | None = compute

    def filled(self) -> LazyEncodings:
        compute = self._compute
        if compute is not None:
            encodings = compute()  # the same Encodings however often: the call as it was made
            with _filling_lock:
                if self._compute is not None:
                    list.extend(self, encodings)
                    self._compute = None
        return self

    @property
    def computed(self) -> bool:
        return self._compute is None

    def __reduce_ex__(self, protocol):
        return list, (list(self.filled()),)


def _filling(name: str) -> Callable:
    method = getattr(list, name)

    def filling(self: LazyEncodings, *args: Any, **kwargs: Any) -> Any:
        return method(self.filled(), *args, **kwargs)

    filling.__name__ = name
    return filling


# Everything that reads the list (or changes it: a change must apply to what HF would give).
for _name in (
    "__len__", "__getitem__", "__iter__", "__reversed__", "__contains__", "__eq__", "__ne__", "__lt__", "__le__",
    "__gt__", "__ge__", "__repr__", "__add__", "__mul__", "__rmul__", "__iadd__", "__imul__", "__setitem__",
    "__delitem__", "__copy__", "copy", "index", "count", "append", "extend", "insert", "pop", "remove", "reverse",
    "sort", "clear",
):  # fmt: skip
    if hasattr(list, _name):
        setattr(LazyEncodings, _name, _filling(_name))


def lazy_batch_encoding(data: dict[str, Any], compute: Callable[[], list]) -> BatchEncoding:
    """HF's `BatchEncoding` of `data` whose Encodings `compute()` gives on first use."""
    # n_sequences: HF reads encodings[0].n_sequences, which is 1 for a text without a pair
    return BatchEncoding(data, LazyEncodings(compute), n_sequences=1)
