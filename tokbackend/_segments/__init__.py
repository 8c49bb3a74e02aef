"""The segment cache, for agent and chat traffic: ids of the text between added tokens, reused.

`cache` splits where HuggingFace does and keeps pieces and the prefix memo; this module builds
one, checks its premise, and makes a call's ids from cached and new pieces (`encode_through_cache`).
"""

from __future__ import annotations

import dataclasses
from array import array
from typing import Any, Protocol, cast

from tokbackend._segments.cache import (
    DEFAULT_SEGMENT_CACHE_MIB,
    AddedTokenSplitter,
    Ids,
    Piece,
    Prefix,
    SegmentCache,
    text_of,
)
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
                "pieces between added tokens are not encoded independently by this pipeline: HF gives "
                f"{expected[:8]} for {text!r}, its pieces encoded alone {assembled[:8]}"
            )
    return None


class PieceEncoder(Protocol):
    """What the cache asks of a routing (`tokbackend._routing.Routing`, which sits above it): ids
    of the pieces it misses, and the indexes of those its Unicode guard sent to `hf_ids`."""

    def encode(
        self, texts: list[str], hf_ids: BatchEncoder, one_by_one: bool = False, arrays: bool = False
    ) -> tuple[list[Any], set[int]]: ...


def encode_through_cache(
    texts: list[str],
    splitter: AddedTokenSplitter,
    cache: SegmentCache,
    routing: PieceEncoder,
    hf_ids: BatchEncoder,
    arrays: bool = False,
) -> tuple[list[Any], int, int]:
    """(ids of each text, `array('q')`s with `arrays`; how many texts HuggingFace answered in part,
    for the guard; how many whole, for the split). Each text is split after the remembered prefix it
    extends; the missed pieces go through one `routing.encode`, and what the doorkeeper admits is stored."""
    found_under = [cache.prefix_of(text, splitter) for text in texts]
    heads = [entry if entry is not None and entry.chunks is not None else None for entry in found_under]
    split = [splitter.split(text, head.chars if head else 0) for text, head in zip(texts, heads)]
    # characters answered by the memo or the cache, or extending a remembered request
    reused_chars = sum(entry.chars for entry in found_under if entry is not None)
    found: dict[str | Piece, Ids] = {}
    missing: dict[str | Piece, None] = {}
    repeated: set[str | Piece] = set()  # missed pieces that occur more than once in the call
    for parts in split:
        for part in parts or ():
            if isinstance(part, int):
                continue
            if part in missing:  # a second occurrence in this call (a burst's system prompt)
                repeated.add(part)
            elif part not in found:
                if (ids := cache.get(part)) is None:
                    missing[part] = None
                    continue
                found[part] = ids
            reused_chars += len(part)
    cache.note_reuse(len(texts), reused_chars, sum(map(len, texts)))
    guarded: set[str | Piece] = set()
    exclusive: set[str | Piece] = set()
    if missing:
        pieces = list(missing)
        encoded, guarded_indexes = routing.encode(
            [text_of(piece) for piece in pieces], hf_ids, one_by_one=True, arrays=arrays
        )
        found.update(zip(pieces, encoded))
        # HF's ids of a guarded piece are as exact as the backend's of the others: stored too, so
        # a conversation holding one sends it to HF once, not on every turn
        guarded = {pieces[index] for index in guarded_indexes}
        stored = cache.put_many(zip(pieces, encoded), repeated)
        # encoded by this call, not stored (never seen by another thread), in no other text of it:
        # their ids are handed out with no copy
        exclusive = missing.keys() - stored - repeated
    # whether HF answered some piece of each text, or the whole of a text the split leaves to it
    via_hf = [
        parts is not None and bool(guarded) and any(part in guarded for part in parts if not isinstance(part, int))
        for parts in split
    ]
    unsplit = [text for text, parts in zip(texts, split) if parts is None]
    answered_whole = iter(hf_ids(unsplit) if unsplit else ())
    results: list[Ids] = []
    for text, entry, head, parts in zip(texts, found_under, heads, split):
        if parts is None:
            whole = next(answered_whole)
            results.append(array("q", whole) if arrays else whole)
            continue
        assembled, reused, boundary = _assemble(parts, found, head, exclusive, splitter.lengths, arrays)
        results.append(assembled)
        if boundary is not None:
            # a request that extends none before it is remembered without its ids (no copy);
            # one that does (an agent's next turn) with them
            cache.remember(
                text, boundary[0], None if entry is None else _chunks(assembled, head, reused, boundary[1]), entry
            )
    return results, sum(via_hf), len(unsplit)


def _chunks(assembled: Ids, head: Prefix | None, reused: int, end: int) -> tuple[Ids, ...]:
    """What the memo keeps of a text's ids up to `end`: the head's chunks, shared, and the ids
    after them; or all of them as one chunk in this call's form where the head's are in the other."""
    kept = head.chunks or () if head else ()
    if all(type(chunk) is type(assembled) for chunk in kept):
        return (*kept, assembled[reused:end])
    return (assembled[:end],)


def _assemble(
    parts: list[str | Piece | int],
    found: dict[str | Piece, Ids],
    head: Prefix | None,
    exclusive: set[str | Piece],
    lengths: dict[int, int],
    arrays: bool,
) -> tuple[Ids, int, tuple[int, int] | None]:
    """(ids of the text, an `array('q')` with `arrays`; how many came from `head`; (characters,
    ids) up to its last added token or None)."""
    chars, count = (head.chars, sum(map(len, head.chunks or ()))) if head else (0, 0)
    reused, boundary = count, None
    for part in parts:
        if isinstance(part, int):
            chars += lengths[part]
            count += 1
            boundary = (chars, count)
        else:
            chars += len(part)
            count += len(found[part])
    largest = None
    longest: str | Piece = ""  # parts[largest]
    if head is None and exclusive and not arrays:
        for index, part in enumerate(parts):
            if not isinstance(part, int) and part in exclusive and (largest is None or len(part) > len(longest)):
                largest, longest = index, part
    # the caller's own: cached ids are never handed out. `extend` takes a list or an array either
    # way (what the cache and the memo hold is in the form of the call that made it)
    ids: Ids = array("q") if arrays else []
    if head:
        for chunk in head.chunks or ():
            ids.extend(chunk)
    if largest is None:
        _extend(ids, parts, found)
    else:
        before = cast("list[int]", ids)
        _extend(before, parts[:largest], found)
        ids = cast("list[int]", found[longest])
        ids[0:0] = before
        _extend(ids, parts[largest + 1 :], found)
    return ids, reused, boundary


def _extend(ids: Ids, parts: list[str | Piece | int], found: dict[str | Piece, Ids]) -> None:
    for part in parts:
        if isinstance(part, int):
            ids.append(part)
        else:
            ids.extend(found[part])


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
