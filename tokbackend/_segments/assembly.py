"""A call's ids assembled from cached pieces, with only the pieces it misses encoded."""

from __future__ import annotations

from array import array
from typing import Any, Protocol, cast

from tokbackend._segments.cache import Ids, Prefix, SegmentCache
from tokbackend._segments.splitter import AddedTokenSplitter, Piece, text_of
from tokbackend.backends._base import BatchEncoder


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
