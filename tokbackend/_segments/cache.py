"""The segment cache: the ids of pieces of text between added tokens, and the prefix memo.

`AddedTokenSplitter` splits a text where HuggingFace splits added tokens out of it
(`tokbackend._added_tokens`, the one copy of HF's rule), its long pieces as cheap dict keys. A
piece seen before (a system prompt, earlier turns) need not be encoded again. `SegmentCache` is
bounded by a byte budget, evicting in insertion order with a second chance for pieces hit since the
last sweep; a hit takes no lock, inserts and eviction take the cache's lock. The prefix memo
remembers recent texts with their ids up to their last added token, for an agent's next turn.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable, Set
from typing import Any, NamedTuple, TypeAlias

from tokbackend._added_tokens import AddedTokens
from tokbackend._process.forking import fork_safe_lock
from tokbackend._tokenizer_json import model_head, top_level_sections

# Pieces longer than this are keyed as a `Piece` (length and the first and last _KEY_CHARS).
_PIECE_CHARS = 1024
_KEY_CHARS = 32
# The default budget: docs/segment-cache.md says what it holds and the measurements behind it.
DEFAULT_SEGMENT_CACHE_MIB = 64
# Bytes a cached piece's ids cost: as a list, 8 an id and each int object (28); as an array, 8.
_BYTES_PER_LISTED_ID = 36
_ENTRY_OVERHEAD = 200
# Remembered prefixes: about one per agent talking to the replica at once.
_MAX_PREFIXES = 64
# Chunks an entry may hold before they are joined into one list (a conversation adds one a turn).
_MAX_CHUNKS = 16
# Characters at the end of a remembered text compared before the whole of it (see `prefix_of`).
_TAIL_CHARS = 64
# The doorkeeper: a piece longer than this is stored the second time it is missed (text that never
# repeats costs no copy and no eviction), remembering the hashes of the last _SEEN_LIMIT missed once.
_ADMIT_AT_ONCE_CHARS = 256
_SEEN_LIMIT = 16_384
# Stepping aside: after _DRY_TEXTS texts in a row reusing less than 1/_WORTH of their characters,
# only every _SAMPLE-th call goes through the cache until one finds enough again.
_DRY_TEXTS = 32
_SAMPLE = 8
_WORTH = 8


# A text's ids as its caller asked for them: a list, or an `array('q')` (`tokbackend.ids_as_arrays`).
Ids: TypeAlias = "list[int] | array[int]"


class Piece:
    """A long piece of text as a dict key cheap to hash: by its length and both ends, with full
    equality on a match (every request's pieces are new strs, each hashed in full otherwise)."""

    __slots__ = ("text", "_hash")

    def __init__(self, text: str) -> None:
        self.text = text
        self._hash = hash((len(text), text[:_KEY_CHARS], text[-_KEY_CHARS:]))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is Piece and (self.text is other.text or self.text == other.text)

    def __len__(self) -> int:
        return len(self.text)

    def __repr__(self) -> str:
        return f"Piece({self.text[:20]!r}...{len(self.text)} characters)"


def text_of(piece: str | Piece) -> str:
    return piece.text if isinstance(piece, Piece) else piece


class AddedTokenSplitter:
    """Splits text where HuggingFace's added vocabulary would, for a backend (`AddedTokens.for_backend`)."""

    def __init__(self, tokens: AddedTokens) -> None:
        self.tokens = tokens
        self.ids = tokens.ids
        self.one_pass = tokens.one_pass
        # characters each added token spans (with `one_pass`, where no match widens)
        self.lengths = {token_id: len(content) for content, token_id in tokens.ids.items()}
        self.longest = tokens.longest
        self.search = tokens.search

    @classmethod
    def for_tokenizer_json(cls, tokenizer_json: str) -> AddedTokenSplitter | str:
        """A splitter, or why pieces of this tokenizer's texts are not worth caching."""
        if re.search(r'"dropout":\s*[0-9]', model_head(top_level_sections(tokenizer_json))):
            return "BPE dropout makes ids random"
        return cls(AddedTokens.from_tokenizer_json(tokenizer_json))

    def split(self, text: str, start: int = 0) -> list[str | Piece | int] | None:
        """Pieces of text and added-token ids of text[start:] (`start`: a boundary, see `cuts_at`);
        None where a backend may not be handed its pieces."""
        parts = self.tokens.for_backend(text[start:] if start else text)
        if parts is None:
            return None
        return [Piece(part) if type(part) is str and len(part) > _PIECE_CHARS else part for part in parts]

    def cuts_at(self, text: str, position: int) -> bool:
        """Whether `position`, a boundary of another text's split with the same start, is one of
        `text`'s too (only for a `one_pass` split: otherwise never)."""
        if not self.one_pass:
            return False
        pattern = self.tokens.pattern
        if pattern is None:
            return True
        start = max(0, position - self.longest + 1)
        end = position + self.longest - 1
        while (match := pattern.search(text, start, end)) is not None and match.start() < position:
            if match.end() > position:  # the longest token at that start runs past: not safe
                return False
            start = match.start() + 1
        return True


class Prefix(NamedTuple):
    """A text the memo remembers, where its last added token ends, and the ids of text[:chars] as
    `chunks` concatenated (None: only the text is remembered); `tail` is compared first."""

    text: str
    chars: int
    chunks: tuple[Ids, ...] | None
    size: int
    tail: str


class SegmentCache:
    """piece -> ids, bounded by `budget_bytes` (see the module docstring)."""

    def __init__(self, budget_bytes: int, steps_aside: bool = True) -> None:
        self.budget_bytes = budget_bytes
        self.steps_aside = steps_aside
        self._ids: dict[str | Piece, Ids] = {}
        self._sizes: dict[str | Piece, int] = {}
        self._hit_since_sweep: dict[str | Piece, bool] = {}
        self._lock = fork_safe_lock(self, "_lock")  # each entry is set in one step
        self.bytes = 0
        self.hits = 0  # unlocked counters: approximate under concurrency, never wrong ids
        self.misses = 0
        self.evictions = 0
        self._seen: dict[int, None] = {}  # hashes of pieces missed once, oldest first
        # The prefix memo, newest first; replaced as a whole under the lock, read without it.
        self._prefixes: tuple[Prefix, ...] = ()
        self.prefix_bytes = 0
        self.prefix_hits = 0
        self._dry = 0  # texts in a row that reused too little (unlocked: approximate, like the counters)
        self._calls = 0
        self.bypassed = 0

    def consulted(self, texts: int) -> bool:
        """Whether a call with this many texts goes through the cache (not while stepping aside)."""
        if not self.stepping_aside:
            return True
        self._calls += 1
        if self._calls % _SAMPLE == 0:
            return True
        self.bypassed += texts
        return False

    def note_reuse(self, texts: int, reused_chars: int, total_chars: int) -> None:
        """Record how much of a consulted call's text came from the cache."""
        self._dry = 0 if reused_chars * _WORTH >= total_chars else self._dry + texts

    @property
    def stepping_aside(self) -> bool:
        return self.steps_aside and self._dry >= _DRY_TEXTS

    def get(self, piece: str | Piece) -> Ids | None:
        ids = self._ids.get(piece)
        if ids is None:
            self.misses += 1
            return None
        self.hits += 1
        self._hit_since_sweep[piece] = True
        return ids

    def put_many(
        self, items: Iterable[tuple[str | Piece, Ids]], seen_twice: Set[str | Piece] = frozenset()
    ) -> set[str | Piece]:
        """Store the pieces the doorkeeper admits (seen before, or in `seen_twice`) and return them:
        the others' ids were never visible to another thread, so the caller may hand them out."""
        stored: set[str | Piece] = set()
        with self._lock:
            seen = self._seen
            for piece, ids in items:
                if piece in self._ids:
                    continue
                if len(piece) > _ADMIT_AT_ONCE_CHARS and piece not in seen_twice:
                    key = hash(piece)  # a short str caches its hash; a Piece holds its own
                    if key not in seen:
                        seen[key] = None
                        if len(seen) > _SEEN_LIMIT:
                            del seen[next(iter(seen))]
                        continue
                    del seen[key]
                per_id = 8 if type(ids) is array else _BYTES_PER_LISTED_ID
                size = sys.getsizeof(text_of(piece)) + per_id * len(ids) + _ENTRY_OVERHEAD
                if size > self.budget_bytes // 4:
                    continue  # one piece may not flush a quarter of the cache
                self._ids[piece] = ids
                self._sizes[piece] = size
                self.bytes += size
                stored.add(piece)
            self._evict_locked()
        return stored

    def _evict_locked(self) -> None:
        while self.bytes > self.budget_bytes and self._ids:
            piece = next(iter(self._ids))
            if self._hit_since_sweep.pop(piece, False):
                self._ids[piece] = self._ids.pop(piece)  # second chance: to the back
                continue
            del self._ids[piece]
            self.bytes -= self._sizes.pop(piece)
            self.evictions += 1

    def prefix_of(self, text: str, splitter: AddedTokenSplitter) -> Prefix | None:
        """The newest remembered text that `text` starts with and splits after the same way."""
        for entry in self._prefixes:
            tail = entry.tail
            if (
                text.startswith(tail, len(entry.text) - len(tail))
                and text.startswith(entry.text)
                and splitter.cuts_at(text, entry.chars)
            ):
                if entry.chunks is not None:
                    self.prefix_hits += 1
                return entry
        return None

    def remember(self, text: str, chars: int, chunks: tuple[Ids, ...] | None, replaces: Prefix | None) -> None:
        """Remember that text[:chars] has the ids `chunks` hold (None: only that `text` was asked
        for); `replaces`: the entry `text` was found under."""
        count = 0
        if chunks is not None:
            count = sum(map(len, chunks))
            if len(chunks) > _MAX_CHUNKS:  # one chunk again, so that reading an entry stays cheap
                joined = chunks[-1][:0]  # in the form of the newest call's ids
                for chunk in chunks:  # extend, in C: a comprehension runs Python code for every id
                    joined.extend(chunk)
                chunks = (joined,)
        # conservative: chunks shared with an older entry are counted in each
        entry = Prefix(text, chars, chunks, sys.getsizeof(text) + 8 * count + _ENTRY_OVERHEAD, text[-_TAIL_CHARS:])
        budget = self.budget_bytes // 4
        if entry.size > budget:
            return
        with self._lock:
            kept, total = [entry], entry.size
            for older in self._prefixes:
                if older is replaces:
                    continue
                if len(kept) == _MAX_PREFIXES or total + older.size > budget:
                    break
                kept.append(older)
                total += older.size
            self._prefixes = tuple(kept)
            self.prefix_bytes = total

    def stats(self) -> dict[str, Any]:
        return {
            "entries": len(self._ids),
            "bytes": self.bytes,
            "budget_mib": self.budget_bytes >> 20,
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "prefixes": len(self._prefixes),
            "prefix_bytes": self.prefix_bytes,
            "prefix_hits": self.prefix_hits,
            "stepping_aside": self.stepping_aside,
            "bypassed": self.bypassed,
        }
