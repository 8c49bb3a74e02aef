"""The segment cache, for agent and chat traffic: ids of the text between added tokens, reused.

`splitter` splits where HuggingFace does, `cache` keeps pieces and the prefix memo, `assembly`
makes a call's ids from cached and new pieces; this module builds one and checks its premise.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from tokbackend._segments.assembly import encode_through_cache
from tokbackend._segments.cache import DEFAULT_SEGMENT_CACHE_MIB, SegmentCache
from tokbackend._segments.splitter import AddedTokenSplitter, Piece, text_of
from tokbackend.backends._base import BatchEncoder

# A text without an added token is one piece, answered by the cache only as a whole repeat: below
# this many characters a fresh encode costs about what a miss costs (bench/RESULTS.md).
LONG_PLAIN_TEXT = 4096


@dataclasses.dataclass(frozen=True)
class Segments:
    """The splitter for a tokenizer's added tokens and the cache it fills (of no budget where
    the segment cache is off but texts must still be split here)."""

    splitter: AddedTokenSplitter
    cache: SegmentCache
    caches: bool = True
    # texts that may hold an added token must be split here (`must_split`): one pass is not HF's rule
    exact_split: bool = False

    def must_split(self, texts: list[str]) -> bool:
        """Whether some text may hold an added token that only the split here finds as HF does."""
        search = self.splitter.search
        for text in texts:  # noqa: SIM110 - a loop, not a generator: no Python frame per text
            if search(text):
                return True
        return False

    def cache_may_help(self, texts: list[str], arrays: bool) -> bool:
        """Whether a call may gain from the cache: some text holds an added token, or, for list
        ids, is long enough that a repeat pays."""
        if not self.caches:
            return False
        search = self.splitter.search
        for text in texts:  # noqa: SIM110 - a loop, not a generator: no Python frame per text
            # the length first: a search reads the whole text
            if (not arrays and len(text) >= LONG_PLAIN_TEXT) or search(text):
                return True
        return False


# Where an added token stands in the texts that check the cache's premise: at the start, in the
# middle and at the end; glued to words, next to spaces, newlines, digits, marks, other scripts.
_PREMISE_TEMPLATES = (
    "{0}hello world",
    "hello{0}world",
    "hello {0} world",
    "hello world{0}",
    "{0} leading space",
    "{0}  two spaces\n  indented",
    "line\n{0}\nnext line",
    "{0}{0}x",
    "x{0}{0}",
    " {0}",
    "\u00e9{0}\u00fc",
    "\u4e2d{0}\u6587",
    "1{0}2",
    "{0}'s",
    "don't{0}",
)


def segments_for(
    tokenizer_json: str, budget_mib: int | None, steps_aside: bool, hf_ids: BatchEncoder
) -> Segments | str:
    """A fresh cache for this tokenizer's added tokens (`budget_mib` None: one that keeps nothing,
    for the split alone), or why pieces cannot be encoded apart (`premise_fails`, BPE dropout)."""
    splitter = AddedTokenSplitter.for_tokenizer_json(tokenizer_json)
    if isinstance(splitter, str):
        return splitter
    cache = SegmentCache((budget_mib or 0) << 20, steps_aside)
    return premise_fails(splitter, hf_ids) or Segments(splitter, cache, budget_mib is not None, not splitter.one_pass)


def premise_fails(splitter: AddedTokenSplitter, hf_ids: BatchEncoder) -> str | None:
    """Why HuggingFace's ids of a premise text are not its pieces' ids (each encoded alone) and
    its added tokens' ids concatenated (as with Metaspace `prepend_scheme="first"`); None when they are."""
    contents = list(splitter.ids)
    if not contents:
        return None
    chosen = list(dict.fromkeys([contents[0], contents[-1], max(contents, key=len)]))
    texts = [template.format(token) for token in chosen for template in _PREMISE_TEMPLATES]
    texts = [text for text in texts if splitter.split(text) is not None]  # the others go to HF whole
    split = [cast("list[str | Piece | int]", splitter.split(text)) for text in texts]
    pieces = list(dict.fromkeys(text_of(part) for parts in split for part in parts if not isinstance(part, int)))
    alone = dict(zip(pieces, hf_ids(pieces)))
    for text, parts, expected in zip(texts, split, hf_ids(texts)):
        assembled = [
            token_id for part in parts for token_id in ([part] if isinstance(part, int) else alone[text_of(part)])
        ]
        if assembled != expected:
            return (
                f"pieces between added tokens are not encoded independently by this pipeline: HF gives "
                f"{expected[:8]} for "
                f"{text!r}, its pieces encoded alone {assembled[:8]}"
            )
    return None


__all__ = [
    "DEFAULT_SEGMENT_CACHE_MIB",
    "AddedTokenSplitter",
    "SegmentCache",
    "Segments",
    "encode_through_cache",
    "premise_fails",
    "segments_for",
    "text_of",
]
