"""The narrow interface every encode backend implements.

This is the low layer of tokbackend: plain primitives in, plain primitives out. A backend
turns text into token ids exactly as the HuggingFace tokenizer it was built from would with
`add_special_tokens=False`, and nothing else: no kwargs, padding, tensors or BatchEncoding.
Everything HuggingFace-shaped lives in `tokbackend.split`, which decides per call whether
a backend may answer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

# Default growth budget, in MiB, for backends that cache what they encode (see accelerate()).
DEFAULT_CACHE_BUDGET_MIB = 256


class BackendUnavailableError(RuntimeError):
    """The backend cannot serve this tokenizer (it cannot load it, or not exactly)."""


@runtime_checkable
class EncodeBackend(Protocol):
    """Text -> ids, for one tokenizer, safe to call from many threads at once."""

    name: str
    # Whether text must be screened for code points on which this backend and HF diverge
    # (see tokbackend.guard); False only for backends that are the reference itself.
    needs_unicode_guard: bool
    # Libraries whose versions a guard record for this backend depends on (besides tokenizers),
    # and the name its records are filed under (the library's, whatever name it is registered as).
    versioned_libraries: tuple[str, ...]
    guard_family: str

    def encode(self, text: str) -> list[int]:
        """Ids of one text, special/added tokens inside it matched as HuggingFace does."""
        ...

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of many texts; may use several threads."""
        ...


class BackendFactory(Protocol):
    """Builds an `EncodeBackend` from the text of a tokenizer.json (HuggingFace's format).

    Keyword options come from `accelerate()` (`cache_budget_mib`) and from guard derivation
    (`cache_budget_mib=None, warm=False`); a factory ignores the ones that do not concern it.
    Raise `BackendUnavailableError` for a tokenizer.json the backend cannot serve.
    """

    def __call__(self, tokenizer_json: str, **options: object) -> EncodeBackend: ...
