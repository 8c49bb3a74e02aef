"""What the layers below the HuggingFace-facing class (state, build, routing, probe) may ask of the
tokenizer they accelerate: a `Reference`."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class Reference(Protocol):
    """The HuggingFace side of one accelerated tokenizer, as the layers below it see it."""

    @property
    def model(self) -> str:
        """The model's name for logs and errors (a built-in name, or the name or path it was loaded from)."""

    def hf_ids(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        """HuggingFace's own ids for plain texts, as its `_encode_plus` gives them."""

    def rust_ids(self, texts: list[str]) -> list[list[int]]:
        """The Rust tokenizer's ids for plain texts, no special tokens added (a derivation's screen)."""

    def tokenizer_json(self) -> str:
        """The tokenizer.json of the tokenizer's current state."""

    def fingerprint(self) -> Hashable:
        """Changes whenever anything an encode depends on may have changed (read on every call)."""

    def content(self) -> Hashable:
        """What a build is made from: equal for two tokenizer states that encode alike."""

    def added_tokens(self) -> list[str]:
        """The contents of the added tokens, in id order."""

    def special_tokens_count(self) -> int:
        """How many special tokens the post-processor adds to one sequence."""
