"""The `BatchEncoding` a fast-path call returns: HuggingFace's class, its Encodings made when first read.

HF's result of a fast tokenizer carries `tokenizers.Encoding`s besides the ids: `is_fast`,
`n_sequences`, `encodings`, `enc[0]`, `tokens()`, `word_ids()`, `char_to_token()`, offsets (which
`apply_chat_template(..., return_assistant_tokens_mask=True)` reads). The fast path has only ids,
and making HF's Encodings costs HF's whole encode: done for every result, it would undo the fast
path for `tokenizer(text)` (what SGLang's tokenizer manager and vLLM's batching tokenizer call).

So a fast-path result is a plain `BatchEncoding` (`type(result) is BatchEncoding`) whose
Encodings are made by `compute()` the first time anything reads `_encodings`, the attribute every
HF method and the `encodings` property read. What is read is then a plain `list` of
`tokenizers.Encoding`, filled before anyone sees it, so C code (`[None] + result.encodings`,
`json`, `numpy`) sees what HF's gives. Reading the ids, `dict(result)`, `n_sequences` or
converting to tensors computes nothing. `compute()` gives the Encodings of the call as the
tokenizer stood when it was made (`tokbackend._tokenizer`), so they stay HF's after the user edits
the id lists in place or changes the tokenizer.

The read is caught by one data descriptor, `BatchEncoding._encodings`, installed when this module
is imported (the one change tokbackend makes to a HuggingFace class): on HF's own results it
returns what `__init__` stored, as the plain attribute did; only a value this module stored (a
`_Pending`) is computed. Pickles and copies hold a plain list, as HF's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokbackend._hf_import import without_the_torch_advisory

with without_the_torch_advisory():
    from transformers.tokenization_utils_base import BatchEncoding

_KEY = "_encodings"


class _Pending:
    """What a fast-path result holds in place of its Encodings until they are read."""

    __slots__ = ("compute",)

    def __init__(self, compute: Callable[[], list[Any]]) -> None:
        self.compute = compute


def _read(result: BatchEncoding) -> Any:
    values = result.__dict__
    stored = values.get(_KEY, _KEY)
    if stored is _KEY:  # never set: HF's `__getattr__` answers, as for a missing plain attribute
        raise AttributeError(_KEY)
    if type(stored) is not _Pending:
        return stored
    encodings = list(stored.compute())  # never under a lock: it is HF's own encode
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


def _install() -> None:
    if not isinstance(BatchEncoding.__dict__.get(_KEY), property):
        BatchEncoding._encodings = property(_read, _write, _delete, "the tokenizers.Encoding list (tokbackend._lazy_encodings)")  # type: ignore[assignment]  # a descriptor over HF's attribute


_install()


def lazy_batch_encoding(data: dict[str, Any], compute: Callable[[], list[Any]]) -> BatchEncoding:
    """HF's `BatchEncoding` of `data` whose Encodings `compute()` gives when first read."""
    # n_sequences: HF reads encodings[0].n_sequences, which is 1 for a text without a pair
    return BatchEncoding(data, _Pending(compute), n_sequences=1)  # type: ignore[arg-type]  # the Encodings, made when read


def encodings_computed(result: BatchEncoding) -> bool:
    """Whether `result`'s Encodings have been made (for tests: reading it any other way makes them)."""
    return type(result.__dict__.get(_KEY)) is not _Pending
