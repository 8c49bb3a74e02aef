"""The segment cache: ids of the text between added tokens, kept as Python lists.

HuggingFace splits added tokens out of a text before anything else (leftmost-longest match on
the raw text), then normalizes, pre-tokenizes and encodes each piece between them on its own.
So the ids of a text are the concatenation of its pieces' ids and its added tokens' ids, and a
piece seen before (the system prompt, the tool schemas, every earlier turn of a conversation)
need not be encoded again. `AddedTokenSplitter` reproduces that split for tokenizers whose added
tokens it can match exactly (no `lstrip`, `rstrip` or `single_word`, none `normalized`, or no
normalizer); other tokenizers do not use the cache (`stats()["segment_cache"]["unsupported"]`).

`SegmentCache` is bounded by a byte budget and evicts in insertion order with a second chance
for pieces hit since the last sweep. A hit takes no lock: one dict read and one dict write,
each atomic under the GIL; inserts and eviction take the cache's lock.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Iterable
from typing import Any

# The budget to turn it on with (`segment_cache_mib=DEFAULT_SEGMENT_CACHE_MIB`): enough for ~40
# agents' 26k-token conversations; see README "Segment cache" for the measurements behind it.
DEFAULT_SEGMENT_CACHE_MIB = 64
# Bytes a cached piece costs beyond its text: the list (8 per id) and each int object (28).
_BYTES_PER_ID = 36
_ENTRY_OVERHEAD = 200


class AddedTokenSplitter:
    """Splits text where HuggingFace's added vocabulary would (see the module docstring)."""

    def __init__(self, tokens: dict[str, int]) -> None:
        self.ids = tokens
        # Longest first: Python's leftmost-first alternation is then leftmost-longest, as HF's.
        # The prefix all tokens share ("<" for Qwen) is pulled out of the alternation, which lets
        # the regex engine skip to candidates (~65 us instead of ~320 us per 130k characters).
        alternatives = sorted(tokens, key=len, reverse=True)
        prefix = os.path.commonprefix(alternatives) if len(alternatives) > 1 else ""
        rest = "|".join(re.escape(token[len(prefix) :]) for token in alternatives)
        # One capturing group: `re.split` then returns pieces and tokens alternately, in C.
        self._pattern = re.compile(f"({re.escape(prefix)}(?:{rest}))") if alternatives else None

    @classmethod
    def for_tokenizer_json(cls, tokenizer_json: str) -> AddedTokenSplitter | str:
        """A splitter, or why this tokenizer's added tokens cannot be split exactly here."""
        from tokbackend.guard.records import _top_level_sections

        sections = _top_level_sections(tokenizer_json)
        added = sections.get("added_tokens") or []
        normalizer = sections.get("normalizer")
        for token in added:
            for flag in ("lstrip", "rstrip", "single_word"):
                if token.get(flag):
                    return f"added token {token['content']!r} has {flag}=True"
            if token.get("normalized") and normalizer is not None:
                return f"added token {token['content']!r} is matched after normalization"
        model = sections.get("model")
        model_head = (model if isinstance(model, str) else json.dumps(model, separators=(",", ":")))[:1000]
        if re.search(r'"dropout":\s*[0-9]', model_head):
            return "BPE dropout makes ids random"
        return cls({token["content"]: token["id"] for token in added if token.get("content")})

    def split(self, text: str) -> list[str | int]:
        """Pieces of text (non-empty str) and added-token ids (int), in order."""
        if self._pattern is None:
            return [text] if text else []
        parts = self._pattern.split(text)
        ids = self.ids
        return [part if index % 2 == 0 else ids[part] for index, part in enumerate(parts) if part]


class SegmentCache:
    """piece -> ids, bounded by `budget_bytes` (see the module docstring)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._ids: dict[str, list[int]] = {}
        self._sizes: dict[str, int] = {}
        self._hit_since_sweep: dict[str, bool] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0  # unlocked counters: approximate under concurrency, never wrong ids
        self.misses = 0
        self.evictions = 0

    def get(self, piece: str) -> list[int] | None:
        ids = self._ids.get(piece)
        if ids is None:
            self.misses += 1
            return None
        self.hits += 1
        self._hit_since_sweep[piece] = True
        return ids

    def put_many(self, items: Iterable[tuple[str, list[int]]]) -> None:
        with self._lock:
            for piece, ids in items:
                if piece in self._ids:
                    continue
                size = sys.getsizeof(piece) + _BYTES_PER_ID * len(ids) + _ENTRY_OVERHEAD
                if size > self.budget_bytes // 4:
                    continue  # one piece may not flush a quarter of the cache
                self._ids[piece] = ids
                self._sizes[piece] = size
                self.bytes += size
            self._evict_locked()

    def _evict_locked(self) -> None:
        while self.bytes > self.budget_bytes and self._ids:
            piece = next(iter(self._ids))
            if self._hit_since_sweep.pop(piece, False):
                self._ids[piece] = self._ids.pop(piece)  # second chance: to the back
                continue
            del self._ids[piece]
            self.bytes -= self._sizes.pop(piece)
            self.evictions += 1

    def stats(self) -> dict[str, Any]:
        return {
            "entries": len(self._ids),
            "bytes": self.bytes,
            "budget_mib": self.budget_bytes >> 20,
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
        }
