"""Splitting a text for the segment cache where HuggingFace splits added tokens out of it
(`tokbackend._added_tokens`, the one copy of HF's rule), its long pieces as cheap dict keys.
"""

from __future__ import annotations

import re

from tokbackend._added_tokens import AddedTokens
from tokbackend._tokenizer_json import model_head, top_level_sections

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
