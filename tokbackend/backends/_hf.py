"""The reference backend: HuggingFace's own Rust tokenizer, called without the Python layers (a
baseline, and tokbackend's plumbing without a change of encoder)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class HFOptions:
    """The HF backend has no options."""


class HFBackend:
    """Encodes through a private `tokenizers.Tokenizer` loaded from the tokenizer.json text."""

    Options = HFOptions
    name = "hf"
    is_reference = True  # the encoder every other backend must match
    needs_unicode_guard = False  # it is the reference
    versioned_libraries = ()
    guard_family = "hf"
    grows_without_bound = False

    def __init__(self, tokenizer_json: str, options: HFOptions = HFOptions()) -> None:
        from tokenizers import Tokenizer

        # A private copy: HF's own calls toggle truncation/padding/encode_special_tokens on the
        # shared object, and those must never leak into plain-text encodes made here.
        self._tokenizer = Tokenizer.from_str(tokenizer_json)
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._tokenizer.encode_special_tokens = False

    @classmethod
    def options_for_scanning(cls) -> HFOptions:
        return HFOptions()

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def stats(self) -> dict[str, Any]:
        return {}

    def prepare(self) -> None:
        """Nothing to prepare: HF's tokenizer has no warm-up worth its cost."""
