"""Calls of the encode surface with keyword arguments, valid and invalid, and what each returns.

A `Call` is one call (`__call__`, `encode` or `apply_chat_template`) with its arguments; its
`outcome` on a tokenizer is the ids and the rest of the result, or the class of the exception it
raised, and the warnings it issued. The accelerated tokenizer must give the outcome HuggingFace
gives for every call: the same ids, or the same exception class (messages differ between
tokenizers versions, so they are not compared), and the same warnings (collected, not printed:
they answer verify's own calls, not the user's). `calls()` draws calls from the values HF's own
checks distinguish (read from `_get_padding_truncation_strategies`, `_encode_plus`,
`set_truncation_and_padding` and the Rust binding's argument conversion): bools and near-bools,
negative and huge lengths, strides larger than the length, strings and floats where ints go,
unknown keywords, texts of every shape.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from hypothesis import strategies as st

# Values per keyword: valid ones and the ones HF rejects, each kind once.
VALUES: dict[str, tuple[Any, ...]] = {
    "add_special_tokens": (True, False, 0, 1, None, "yes"),
    "padding": (False, True, "longest", "max_length", "do_not_pad", None, 0, "sideways"),
    "truncation": (None, False, True, "longest_first", "only_first", "only_second", "do_not_truncate", 0, 0.0, "yes"),
    "max_length": (None, 0, 1, 5, 60, 4000, -1, 1 << 64, "5", 5.0, True),
    "stride": (0, 2, 100, 5000, -1, "2", 2.0, None),
    "return_tensors": (None, "np"),
    "split_special_tokens": (None, True, False, 0, "yes"),
    "is_split_into_words": (False, True, 0, None),
    "return_attention_mask": (None, True, False),
    "return_token_type_ids": (None, True, False),
    "return_overflowing_tokens": (False, True),
    "return_special_tokens_mask": (False, True),
    "return_offsets_mapping": (False, True),
    "return_length": (False, True),
    "pad_to_multiple_of": (None, 8, "8", -1),
    "padding_side": (None, "left", "right", "sideways", 5),
    "verbose": (True, False),
    "some_future_flag": (1,),
}


def texts(added_tokens: list[str]) -> st.SearchStrategy[Any]:
    """Text arguments: a str, a batch, and the shapes HF rejects or treats otherwise."""
    token = st.sampled_from(added_tokens or ["<|x|>"])
    plain = st.sampled_from(["Hello, world!", "don't 12345 \u4e2d\u6587", "e\u0301 \U0001f44d", "", "   ", "a" * 40])
    text = st.one_of(plain, st.tuples(plain, token, plain).map("".join))
    odd = st.sampled_from([None, 5, 5.0, b"bytes", [], (), [None], ["ok", None], ["ok", 5], "lone \ud800", ("a", "b")])
    return st.one_of(text, st.lists(text, min_size=1, max_size=4), odd)


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of the encode surface."""

    method: str  # "__call__", "encode" or "apply_chat_template"
    text: Any
    kwargs: dict[str, Any]

    def __repr__(self) -> str:
        arguments = ", ".join([repr(self.text), *(f"{key}={value!r}" for key, value in self.kwargs.items())])
        return f"tokenizer.{self.method}({arguments})"


@st.composite
def _call(draw, added_tokens: list[str]) -> Call:
    method = draw(st.sampled_from(["__call__", "encode", "apply_chat_template"]))
    names = draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=4, unique=True))
    kwargs = {name: draw(st.sampled_from(VALUES[name])) for name in names}
    if method == "apply_chat_template":
        # its own keywords are template variables; tokenizer arguments go through tokenizer_kwargs
        content = draw(texts(added_tokens).filter(lambda value: isinstance(value, str)))
        messages = [{"role": "user", "content": content}]
        return Call(
            method, messages, {"tokenize": True, "return_dict": draw(st.booleans()), "tokenizer_kwargs": kwargs}
        )
    return Call(method, draw(texts(added_tokens)), kwargs)


def calls(added_tokens: list[str]) -> st.SearchStrategy[Call]:
    """Calls with 0-4 keyword arguments drawn from `VALUES` and a text drawn from `texts`."""
    return _call(added_tokens)


def outcome(tokenizer, call: Call) -> tuple[str, Any, list[str]]:
    """("ok", the result as plain data) or ("raises", the exception's class name), then the
    warnings the call issued ('UserWarning: ...'), after resetting
    what an earlier call left in HF's Rust tokenizer (HF's own checks depend on it: a stride of
    2.0 passes after an identical call with 2, and fails on a fresh tokenizer)."""
    rust = tokenizer.backend_tokenizer
    rust.no_truncation()
    rust.no_padding()
    rust.encode_special_tokens = False
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        try:
            result = getattr(tokenizer, call.method)(call.text, **call.kwargs)
        except Exception as error:  # noqa: BLE001 - the class is the outcome
            return "raises", type(error).__name__, _warned(issued)
    return "ok", plain(result), _warned(issued)


def _warned(issued: list[warnings.WarningMessage]) -> list[str]:
    return [f"{warning.category.__name__}: {warning.message}" for warning in issued]


def plain(value: Any) -> Any:
    """A result as comparable plain data: a BatchEncoding's items (arrays as lists), a list as is."""
    if hasattr(value, "keys") and hasattr(value, "items"):
        return {key: plain(item) for key, item in value.items()}
    if hasattr(value, "tolist"):
        value = value.tolist()  # a ragged batch is an array of arrays
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value
