"""May the backend answer this call? One pure function decides, for every entry point.

`fast_path_reason` looks only at its arguments (the call and the tokenizer's defaults) and
returns None when the backend may answer, otherwise the `FallbackReason` HuggingFace answers
for. The other reasons are found while answering (the Unicode guard, bad input, a call that
would truncate); every reason is a member of one enum, so `stats()` and the logs name them
alike.
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
    PAD_TO_MULTIPLE_OF = "pad_to_multiple_of"
    SPLIT_SPECIAL_TOKENS = "split_special_tokens"
    RETURN_TOKEN_TYPE_IDS = "return_token_type_ids"
    RETURN_OVERFLOWING_TOKENS = "return_overflowing_tokens"
    RETURN_SPECIAL_TOKENS_MASK = "return_special_tokens_mask"
    RETURN_OFFSETS_MAPPING = "return_offsets_mapping"
    RETURN_LENGTH = "return_length"
    IS_SPLIT_INTO_WORDS = "is_split_into_words"
    SANITIZE_CONTROL_TOKENS = "sanitize_control_tokens"
    UNKNOWN_KWARG = "unknown_kwarg"
    # found while answering
    FAST_PATH_DISABLED = "fast_path_disabled"
    POST_PROCESSOR = "post_processor"
    UNICODE_GUARD = "unicode_guard"
    BAD_INPUT = "bad_input"
    BACKEND_ERROR = "backend_error"

    @property
    def is_problem(self) -> bool:
        """A problem rather than a documented hand-over (logged at WARNING, not INFO)."""
        return self is FallbackReason.BACKEND_ERROR


# `_encode_plus` flags whose true values the fast path cannot reproduce, in the order checked.
_FLAGS_NEEDING_HF = (
    FallbackReason.RETURN_OVERFLOWING_TOKENS,
    FallbackReason.RETURN_SPECIAL_TOKENS_MASK,
    FallbackReason.RETURN_OFFSETS_MAPPING,
    FallbackReason.RETURN_LENGTH,
    FallbackReason.IS_SPLIT_INTO_WORDS,
    FallbackReason.SANITIZE_CONTROL_TOKENS,
)
# Accepted with any value: warnings only, or a padding side the fast path never pads on.
_HARMLESS_KWARGS = frozenset({"verbose", "stride", "padding_side", "max_length"})
KNOWN_KWARGS = frozenset(
    {
        "padding_strategy",
        "truncation_strategy",
        "return_tensors",
        "pad_to_multiple_of",
        "split_special_tokens",
        "return_token_type_ids",
        "return_attention_mask",
        *(flag.value for flag in _FLAGS_NEEDING_HF),
        *_HARMLESS_KWARGS,
    }
)
# Truncation strategies that, for one sequence, cut it to `max_length` and nothing else.
_SINGLE_SEQUENCE_TRUNCATION = frozenset({"longest_first", "only_first"})


@dataclasses.dataclass(frozen=True)
class TokenizerDefaults:
    """What a call inherits from the tokenizer when it does not say."""

    split_special_tokens: bool
    returns_token_type_ids: bool  # "token_type_ids" in model_input_names


def fast_path_reason(text: Any, text_pair: Any, kwargs: Mapping[str, Any], defaults: TokenizerDefaults) -> FallbackReason | None:
    """None when the backend may answer this `_encode_plus(text, text_pair, **kwargs)` call.

    A call with truncation may be answered: `length_limit(kwargs)` gives the length the caller
    must check the ids against, since only a call that would cut nothing keeps the fast ids.

    >>> fast_path_reason("hi", None, {}, TokenizerDefaults(False, False)) is None
    True
    """
    if not (isinstance(text, str) or (isinstance(text, (list, tuple)) and text and all(isinstance(item, str) for item in text))):
        return FallbackReason.NON_TEXT_INPUT
    if text_pair is not None:
        return FallbackReason.TEXT_PAIR
    if _value(kwargs.get("padding_strategy")) not in (None, "do_not_pad"):
        return FallbackReason.PADDING
    truncation = _value(kwargs.get("truncation_strategy"))
    if truncation not in (None, "do_not_truncate") and (
        truncation not in _SINGLE_SEQUENCE_TRUNCATION or not isinstance(kwargs.get("max_length"), int)
    ):
        return FallbackReason.TRUNCATION
    if kwargs.get("return_tensors") is not None:
        return FallbackReason.RETURN_TENSORS
    if kwargs.get("pad_to_multiple_of") is not None:
        return FallbackReason.PAD_TO_MULTIPLE_OF
    split_special_tokens = kwargs.get("split_special_tokens")
    if split_special_tokens or (split_special_tokens is None and defaults.split_special_tokens):
        return FallbackReason.SPLIT_SPECIAL_TOKENS
    return_token_type_ids = kwargs.get("return_token_type_ids")
    if return_token_type_ids or (return_token_type_ids is None and defaults.returns_token_type_ids):
        return FallbackReason.RETURN_TOKEN_TYPE_IDS
    for flag in _FLAGS_NEEDING_HF:
        if kwargs.get(flag.value):
            return FallbackReason.TRUNCATION if flag is FallbackReason.RETURN_OVERFLOWING_TOKENS and truncation else flag
    if any(key not in KNOWN_KWARGS for key in kwargs):
        return FallbackReason.UNKNOWN_KWARG
    return None


def length_limit(kwargs: Mapping[str, Any]) -> int | None:
    """The most ids (special tokens included) a call allowed by `fast_path_reason` may return
    unchanged; None when it asks for no truncation."""
    if _value(kwargs.get("truncation_strategy")) in (None, "do_not_truncate"):
        return None
    return kwargs["max_length"]


def unknown_kwargs(kwargs: Mapping[str, Any]) -> list[str]:
    """The keyword arguments `fast_path_reason` does not know, for the log line."""
    return sorted(key for key in kwargs if key not in KNOWN_KWARGS)


def _value(strategy: Any) -> Any:
    """An HF strategy enum's string value (they are str enums), or the value itself."""
    return getattr(strategy, "value", strategy)
