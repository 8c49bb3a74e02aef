"""What the layers below the HuggingFace-facing class may ask of the tokenizer they accelerate.

`tokbackend.tokenizer` is the only module that knows HuggingFace's tokenizer classes. It hands
the layers below it (state, build, routing, probe) a `Reference`: HuggingFace's own ids for
plain texts (the answer every backend must match), the tokenizer.json backends are built from,
a cheap fingerprint of what the encode depends on, and the added tokens.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class Reference(Protocol):
    """The HuggingFace side of one accelerated tokenizer, as the layers below it see it."""

    @property
    def model(self) -> str:
        """The model's name for logs and errors (a built-in name, or the name or path it was loaded from)."""
        ...

    def hf_ids(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        """HuggingFace's own ids for plain texts, as its `_encode_plus` gives them."""
        ...

    def tokenizer_json(self) -> str:
        """The tokenizer.json of the tokenizer's current state."""
        ...

    def fingerprint(self) -> Hashable:
        """Changes whenever anything an encode depends on changes (checked on every call)."""
        ...

    def added_tokens(self) -> list[str]:
        """The contents of the added tokens, in id order."""
        ...
