"""Splitting a text where HuggingFace splits added tokens out of it (leftmost-longest, on the raw
text, before it encodes each piece between them on its own). Where the added tokens cannot be
matched so exactly (`lstrip`, `rstrip`, `single_word`, or `normalized` with a normalizer), the
segment cache is off.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from tokbackend._tokenizer_json import does_nothing, model_head, top_level_sections

# Pieces longer than this are keyed as a `Piece` (length and the first and last _KEY_CHARS).
_PIECE_CHARS = 1024
_KEY_CHARS = 32


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
    """Splits text where HuggingFace's added vocabulary would (see the module docstring)."""

    def __init__(self, tokens: dict[str, int]) -> None:
        self.ids = tokens
        # Longest first: Python's leftmost-first alternation is then leftmost-longest, as HF's.
        # The prefix all tokens share ("<" for Qwen) is pulled out, so the engine skips to candidates.
        self.lengths = {token_id: len(token) for token, token_id in tokens.items()}
        self.longest = max(map(len, tokens), default=0)
        alternatives = sorted(tokens, key=len, reverse=True)
        prefix = os.path.commonprefix(alternatives) if len(alternatives) > 1 else ""
        rest = "|".join(re.escape(token[len(prefix) :]) for token in alternatives)
        # One capturing group: `re.split` then returns pieces and tokens alternately, in C.
        self._pattern = re.compile(f"({re.escape(prefix)}(?:{rest}))") if alternatives else None
        # the first added token in a text, or None (C code where there are added tokens: read on every call)
        self.search: Callable[[str], object] = self._pattern.search if self._pattern is not None else lambda text: None

    @classmethod
    def for_tokenizer_json(cls, tokenizer_json: str) -> AddedTokenSplitter | str:
        """A splitter, or why this tokenizer's added tokens cannot be split exactly here."""
        sections = top_level_sections(tokenizer_json)
        added = sections.get("added_tokens") or []
        normalizes = not does_nothing(sections.get("normalizer"))
        for token in added:
            for flag in ("lstrip", "rstrip", "single_word"):
                if token.get(flag):
                    return f"added token {token['content']!r} has {flag}=True"
            if token.get("normalized") and normalizes:
                return f"added token {token['content']!r} is matched after normalization"
        if re.search(r'"dropout":\s*[0-9]', model_head(sections)):
            return "BPE dropout makes ids random"
        return cls({token["content"]: token["id"] for token in added if token.get("content")})

    def split(self, text: str, start: int = 0) -> list[str | Piece | int]:
        """Pieces of text (non-empty; a long one as a `Piece`) and added-token ids (int), in
        order, of text[start:] (`start` must be a boundary of the split: see `cuts_at`)."""
        if start:
            text = text[start:]
        parts = self._pattern.split(text) if self._pattern is not None else [text]
        ids = self.ids
        return [
            (part if len(part) <= _PIECE_CHARS else Piece(part)) if index % 2 == 0 else ids[part]
            for index, part in enumerate(parts)
            if part
        ]

    def cuts_at(self, text: str, position: int) -> bool:
        """Whether `position`, the end of an added token where the split of another text with the
        same start had a boundary, is a boundary of `text`'s split too: unless an added token
        matches across it, starting less than `self.longest` characters before it."""
        if self._pattern is None:
            return True
        start = max(0, position - self.longest + 1)
        end = position + self.longest - 1
        while (match := self._pattern.search(text, start, end)) is not None and match.start() < position:
            if match.end() > position:  # the longest token at that start runs past: not safe
                return False
            start = match.start() + 1
        return True
