"""May the backend answer this call? One pure function, `fast_path_reason`, decides for every entry point.

It answers None or the `FallbackReason` HuggingFace answers for (the reasons found later, while
answering, are members of the same enum). Only calls HF provably accepts are answered.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any


class FallbackReason(str, enum.Enum):
    """Why HuggingFace answered a call instead of the backend."""

    # decided from the call alone (`fast_path_reason`)
    NON_TEXT_INPUT = "non_text_input"
    TEXT_PAIR = "text_pair"
    PADDING = "padding"
    TRUNCATION = "truncation"  # also: truncation allowed, and the ids would be cut
    RETURN_TENSORS = "return_tensors"
    SPLIT_SPECIAL_TOKENS = "split_special_tokens"
    RETURN_TOKEN_TYPE_IDS = "return_token_type_ids"
    RETURN_OVERFLOWING_TOKENS = "return_overflowing_tokens"
    RETURN_SPECIAL_TOKENS_MASK = "return_special_tokens_mask"
    RETURN_OFFSETS_MAPPING = "return_offsets_mapping"
    RETURN_LENGTH = "return_length"
    IS_SPLIT_INTO_WORDS = "is_split_into_words"
    SANITIZE_CONTROL_TOKENS = "sanitize_control_tokens"
    UNKNOWN_KWARG = "unknown_kwarg"
    ARGUMENT_VALUE = "argument_value"  # a value HF validates (and may reject): HF answers or raises
    # found while answering
    FAST_PATH_DISABLED = "fast_path_disabled"
    POST_PROCESSOR = "post_processor"
    UNICODE_GUARD = "unicode_guard"
    ADDED_TOKENS = "added_tokens"  # split at its added tokens only by HF (`tokbackend._added_tokens`)
    BAD_INPUT = "bad_input"
    BACKEND_ERROR = "backend_error"  # the one problem, not a documented hand-over: logged at WARNING


# (keyword, reason) of the `_encode_plus` flags whose true values the fast path cannot reproduce,
# in the order checked (HF reads each for truthiness only); `.value` read once, not per call.
_FLAG_KWARGS = tuple(
    (flag.value, flag)
    for flag in (
        FallbackReason.RETURN_OVERFLOWING_TOKENS,
        FallbackReason.RETURN_SPECIAL_TOKENS_MASK,
        FallbackReason.RETURN_OFFSETS_MAPPING,
        FallbackReason.RETURN_LENGTH,
        FallbackReason.SANITIZE_CONTROL_TOKENS,
    )
)
# Accepted with any value: read for truthiness only, or never read without padding or truncation
# (where `max_length` and `stride` are checked).
_HARMLESS_KWARGS = ("verbose", "stride", "padding_side", "max_length", "pad_to_multiple_of", "is_split_into_words")
_CHECKED_KWARGS = (
    "padding_strategy",
    "truncation_strategy",
    "return_tensors",
    "split_special_tokens",
    "return_token_type_ids",
)
KNOWN_KWARGS = frozenset(
    {*_CHECKED_KWARGS, "return_attention_mask", *(keyword for keyword, _ in _FLAG_KWARGS), *_HARMLESS_KWARGS}
)
# Truncation strategies that, for one sequence, cut it to `max_length` and nothing else.
_SINGLE_SEQUENCE_TRUNCATION = frozenset({"longest_first", "only_first"})
# Rust takes `max_length` and `stride` as usize: pyo3 raises OverflowError outside [0, 2**64).
_USIZE_END = 1 << 64


@dataclasses.dataclass(frozen=True)
class Truncation:
    """A truncation the fast path may keep: only ids that fit in `max_length` (nothing cut) are
    kept, and `stride` must pass HF's Rust check (`AccelerationState.answer`)."""

    max_length: int
    stride: int


_ONLY_STR = frozenset({str})  # the types in a batch of plain texts (compared in C: no Python frame per text)


def fast_path_reason(
    text: Any,
    text_pair: Any,
    add_special_tokens: Any,
    kwargs: Mapping[str, Any],
    split_special_tokens: Any,
    returns_token_type_ids: bool,
    truncation_side: str = "right",
) -> FallbackReason | None:
    """None when the backend may answer this `_encode_plus(text, text_pair, add_special_tokens,
    **kwargs)` call: HF would accept it and return the ids alone (and an attention mask).

    A truncating call may be answered if it cuts nothing (`truncation_of` gives what to check).
    The last three arguments are the tokenizer's defaults the call inherits.

    >>> fast_path_reason("hi", None, True, {}, False, False) is None
    True
    >>> fast_path_reason("hi", None, 0, {}, False, False)  # HF: TypeError from pyo3
    <FallbackReason.ARGUMENT_VALUE: 'argument_value'>
    """
    if not (type(text) is str or (type(text) in (list, tuple) and text and {*map(type, text)} == _ONLY_STR)):
        return FallbackReason.NON_TEXT_INPUT
    if text_pair is not None:
        return FallbackReason.TEXT_PAIR
    if add_special_tokens is not True and add_special_tokens is not False:
        return FallbackReason.ARGUMENT_VALUE
    # HF's strategies are str enums, equal to their values: compared as they come (no `.value`)
    if kwargs.get("padding_strategy") not in (None, "do_not_pad"):
        return FallbackReason.PADDING
    truncation = kwargs.get("truncation_strategy")
    if truncation not in (None, "do_not_truncate"):
        if not isinstance(truncation, enum.Enum) or truncation.value not in _SINGLE_SEQUENCE_TRUNCATION:
            return FallbackReason.TRUNCATION
        usize = _is_usize(kwargs.get("max_length")) and _is_usize(kwargs.get("stride", 0))
        if not usize or truncation_side not in ("right", "left"):
            return FallbackReason.ARGUMENT_VALUE
    if kwargs.get("return_tensors") is not None:
        return FallbackReason.RETURN_TENSORS
    split = kwargs.get("split_special_tokens")
    if split is None:
        split = split_special_tokens
    if split is not False:
        return FallbackReason.SPLIT_SPECIAL_TOKENS if split is True else FallbackReason.ARGUMENT_VALUE
    return_token_type_ids = kwargs.get("return_token_type_ids")
    if return_token_type_ids or (return_token_type_ids is None and returns_token_type_ids):
        return FallbackReason.RETURN_TOKEN_TYPE_IDS
    is_split_into_words = kwargs.get("is_split_into_words", False)
    if is_split_into_words is not False:
        return FallbackReason.IS_SPLIT_INTO_WORDS if is_split_into_words else FallbackReason.ARGUMENT_VALUE
    for keyword, flag in _FLAG_KWARGS:
        if kwargs.get(keyword):
            return (
                FallbackReason.TRUNCATION if flag is FallbackReason.RETURN_OVERFLOWING_TOKENS and truncation else flag
            )
    if kwargs and not KNOWN_KWARGS.issuperset(kwargs):
        return FallbackReason.UNKNOWN_KWARG
    return None


def truncation_of(kwargs: Mapping[str, Any]) -> Truncation | None:
    """The truncation a call allowed by `fast_path_reason` asks for; None when it asks for none."""
    if kwargs.get("truncation_strategy") in (None, "do_not_truncate"):
        return None
    return Truncation(kwargs["max_length"], kwargs.get("stride", 0))


def _is_usize(value: Any) -> bool:
    # bool is an int that pyo3 accepts as 0/1; leaving it (and floats) to HF is exact, only not fast
    return type(value) is int and 0 <= value < _USIZE_END
