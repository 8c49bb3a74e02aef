"""Splitting text at added tokens exactly as HuggingFace's tokenizers does.

The rule (tokenizers' `AddedVocabulary::extract_and_normalize`) takes two passes. The added tokens
that are not `normalized` are matched first, on the raw text; the normalizer then runs on each piece
between them, and the `normalized` tokens (their contents normalized too) are matched inside those
normalized pieces. Each pass is leftmost-longest over its own tokens and goes on after the end of
each match, also of one it drops: a `single_word` token next to a word character, or a special
token under `split_special_tokens`. `lstrip` and `rstrip` widen a match over the white space beside
it (never back into the previous match). What is left between the matches is encoded piece by piece.

`AddedTokens.split` is that rule, in raw text; `AddedTokens.for_backend` is the split a backend may
be handed: pieces in which no added token could be found again by anyone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import regex

from tokbackend._tokenizer_json import does_nothing, top_level_sections

# What tokenizers' Rust `regex` calls `\w` and `\s` (Unicode word characters and White_Space).
_WORD = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
_SPACE = regex.compile(r"\p{White_Space}")
# Normalizers that leave ASCII text as it is (Unicode normal forms).
_ASCII_PRESERVING = frozenset({"NFC", "NFD", "NFKC", "NFKD"})

Part = str | int  # a piece of text, or an added token's id


@dataclasses.dataclass(frozen=True)
class AddedToken:
    """One added token as tokenizer.json's `added_tokens` holds it."""

    id: int
    content: str
    special: bool = False
    normalized: bool = True
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> AddedToken:
        return cls(
            entry["id"],
            entry["content"],
            bool(entry.get("special", False)),
            bool(entry.get("normalized", True)),
            bool(entry.get("lstrip", False)),
            bool(entry.get("rstrip", False)),
            bool(entry.get("single_word", False)),
        )


class _Pass:
    """One pass's tokens, by the content it matches."""

    def __init__(self, tokens: dict[str, AddedToken]) -> None:
        self.tokens = tokens
        # longest first: Python's leftmost-first alternation is then leftmost-longest, as HF's
        self.pattern = re.compile(_alternation(tokens)) if tokens else None

    def matches(self, text: str, split_special_tokens: bool) -> Iterator[tuple[int, int, int] | None]:
        """(start, stop, id) of each match HF keeps, in order; None for each it drops."""
        if self.pattern is None:
            return
        offset = 0  # where the previous kept match ended
        for match in self.pattern.finditer(text):
            start, stop = match.span()
            token = self.tokens[match.group()]
            if split_special_tokens and token.special:
                yield None
                continue
            if token.single_word and (
                (start > 0 and _WORD.match(text, start - 1)) or (stop < len(text) and _WORD.match(text, stop))
            ):
                yield None
                continue
            if token.lstrip:
                begin = start
                while begin > 0 and _SPACE.match(text, begin - 1):
                    begin -= 1
                start = max(begin, offset)
            if token.rstrip:
                while stop < len(text) and _SPACE.match(text, stop):
                    stop += 1
            yield start, stop, token.id
            offset = stop


class AddedTokens:
    """A tokenizer's added tokens and the rule that splits text at them (see the module docstring)."""

    def __init__(
        self, tokens: Iterable[AddedToken], normalize: Callable[[str], str] | None, ascii_preserving: bool
    ) -> None:
        tokens = [token for token in tokens if token.content]
        self.ids = {token.content: token.id for token in tokens}
        self._normalize = normalize
        self._ascii_preserving = normalize is None or ascii_preserving
        self._raw = _Pass({token.content: token for token in tokens if not token.normalized})
        by_normalized: dict[str, AddedToken] = {}
        for token in tokens:
            if token.normalized:
                by_normalized.setdefault(normalize(token.content) if normalize else token.content, token)
        # A token the normalizer empties matches everywhere (HF panics): HF answers alone.
        self.hf_only = by_normalized.pop("", None) is not None
        self._normalized = _Pass(by_normalized)
        # Every content either pass could find in raw text.
        contents = {*self.ids, *by_normalized}
        self.pattern = re.compile(_alternation(contents)) if contents else None
        self.one_pass = (
            not self.hf_only
            and not any(token.lstrip or token.rstrip or token.single_word for token in tokens)
            and (not by_normalized or (not self._raw.tokens and normalize is None))
        )
        # Only with `one_pass`: one C-level split yields pieces and contents alternately.
        self._one_pass_split = re.compile(f"({self.pattern.pattern})") if self.pattern is not None else None
        self.longest = max(map(len, contents), default=0)
        # `may_hold_token` as C code where no normalizer can make a token appear (read on every call)
        self.search: Callable[[str], object] = self.may_hold_token
        if self.pattern is not None and self._normalize is None and not self.hf_only:
            self.search = self.pattern.search

    @classmethod
    def from_tokenizer_json(cls, tokenizer_json: str) -> AddedTokens:
        """The added tokens of a tokenizer.json, with its normalizer for the second pass."""
        sections = top_level_sections(tokenizer_json)
        tokens = [AddedToken.from_entry(entry) for entry in sections.get("added_tokens") or []]
        normalizer = sections.get("normalizer")
        if normalizer is None or does_nothing(normalizer) or not any(token.normalized for token in tokens):
            return cls(tokens, None, True)
        return cls(tokens, normalizer_of(normalizer), _preserves_ascii(normalizer))

    def may_hold_token(self, text: str) -> bool:
        """False only where HF's split of `text` is `[text]`, with no piece any pass could change."""
        if self.hf_only:
            return True
        if self.pattern is None:
            return False
        if self.pattern.search(text) is not None:
            return True
        # a normalizer may make a normalized token of text that holds none
        return self._normalize is not None and not (self._ascii_preserving and text.isascii())

    def split(self, text: str, split_special_tokens: bool = False) -> list[Part] | None:
        """HF's split of `text`: its pieces (raw text) and added tokens' ids, in order; None where a
        normalized token is matched in a piece the normalizer changes."""
        return self._split(text, split_special_tokens, strict=False)

    def for_backend(self, text: str) -> list[Part] | None:
        """`split(text)` where no piece holds the content of any added token, else None."""
        if self.one_pass:
            if self._one_pass_split is None:
                return [text] if text else []
            return [
                part if index % 2 == 0 else self.ids[part]
                for index, part in enumerate(self._one_pass_split.split(text))
                if part
            ]
        return self._split(text, False, strict=True)

    def _split(self, text: str, split_special_tokens: bool, strict: bool) -> list[Part] | None:
        """The split, or None (see `split`; with `strict`, also where `for_backend` gives None)."""
        if self.hf_only:
            return None
        parts: list[Part] = []
        for part in self._pass(text, self._raw, split_special_tokens, strict):
            if part is None:
                return None
            if isinstance(part, int):
                parts.append(part)
                continue
            second = self._second_pass(part, split_special_tokens, strict)
            if second is None:
                return None
            parts.extend(second)
        if strict and self.pattern is not None:
            anywhere = self.pattern.search
            if any(isinstance(part, str) and anywhere(part) is not None for part in parts):
                return None
        return parts

    def _second_pass(self, piece: str, split_special_tokens: bool, strict: bool) -> list[Part] | None:
        if self._normalized.pattern is None:
            return [piece]
        normalized = (
            piece if self._normalize is None or (self._ascii_preserving and piece.isascii()) else self._normalize(piece)
        )
        found = list(self._pass(normalized, self._normalized, split_special_tokens, strict))
        if found == [normalized]:
            return [piece]
        if normalized != piece or None in found:
            return None
        # HF does not normalize these pieces again, a backend does: alike only where that changes nothing
        normalize = self._normalize
        if normalize is not None and any(isinstance(part, str) and normalize(part) != part for part in found):
            return None
        return found  # type: ignore[return-value]  # no None in it

    @staticmethod
    def _pass(text: str, tokens: _Pass, split_special_tokens: bool, strict: bool) -> Iterator[Part | None]:
        """One pass's pieces and ids; None for a dropped match where `strict`, and where HF fails."""
        offset = 0
        for match in tokens.matches(text, split_special_tokens):
            if match is None:
                if strict:
                    yield None
                continue
            start, stop, token_id = match
            if start > stop:  # stripped back past its own end (HF panics): not split here
                yield None
                return
            if offset < start:
                yield text[offset:start]
            if start < stop:  # a match stripped to nothing is dropped, as HF drops empty splits
                yield token_id
            offset = stop
        if offset < len(text):
            yield text[offset:]


def _alternation(contents: Iterable[str]) -> str:
    """A regular expression matching the leftmost-longest of `contents`, their common prefix pulled out."""
    alternatives = sorted(contents, key=len, reverse=True)
    prefix = os.path.commonprefix(alternatives) if len(alternatives) > 1 else ""
    rest = "|".join(re.escape(content[len(prefix) :]) for content in alternatives)
    return f"{re.escape(prefix)}(?:{rest})"


def normalizer_of(section: dict[str, Any]) -> Callable[[str], str]:
    """`normalize_str` of the normalizer a tokenizer.json section describes."""
    from tokenizers import Tokenizer

    empty = {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}
    description: dict[str, Any] = dict.fromkeys(("truncation", "padding", "pre_tokenizer", "post_processor", "decoder"))
    description.update(version="1.0", added_tokens=[], normalizer=section, model=empty)
    normalizer = Tokenizer.from_str(json.dumps(description)).normalizer
    assert normalizer is not None
    return normalizer.normalize_str  # type: ignore[no-any-return]


def _preserves_ascii(section: dict[str, Any]) -> bool:
    if section.get("type") == "Sequence":
        return all(_preserves_ascii(part) for part in section.get("normalizers") or [])
    return section.get("type") in _ASCII_PRESERVING


__all__ = ["AddedToken", "AddedTokens", "Part", "normalizer_of"]
