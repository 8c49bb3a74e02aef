"""The segment cache, for agent and chat traffic: ids of the text between added tokens, reused.

Modules: `splitter` (where HuggingFace splits added tokens out of a text), `cache` (the bounded
piece cache and the prefix memo), `assembly` (a call's ids from cached and newly encoded pieces).
It sits above the backend cut: any backend's ids can be cached.
"""

from __future__ import annotations

import dataclasses

from tokbackend.segments.assembly import encode_through_cache
from tokbackend.segments.cache import DEFAULT_SEGMENT_CACHE_MIB, SegmentCache
from tokbackend.segments.splitter import AddedTokenSplitter, Piece, text_of


@dataclasses.dataclass(frozen=True)
class Segments:
    """The splitter for a tokenizer's added tokens and the (initially empty) cache it fills."""

    splitter: AddedTokenSplitter
    cache: SegmentCache


def segments_for(tokenizer_json: str, budget_mib: int, steps_aside: bool) -> Segments | str:
    """A fresh cache for this tokenizer's added tokens, or why its split cannot be reproduced."""
    splitter = AddedTokenSplitter.for_tokenizer_json(tokenizer_json)
    if isinstance(splitter, str):
        return splitter
    return Segments(splitter, SegmentCache(budget_mib << 20, steps_aside))


__all__ = [
    "DEFAULT_SEGMENT_CACHE_MIB",
    "AddedTokenSplitter",
    "Piece",
    "SegmentCache",
    "Segments",
    "encode_through_cache",
    "segments_for",
    "text_of",
]
