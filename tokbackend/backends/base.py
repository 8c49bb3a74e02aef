"""The narrow interface every encode backend implements.

This is the low layer of tokbackend: plain primitives in, plain primitives out. A backend
turns text into token ids exactly as the HuggingFace tokenizer it was built from would with
`add_special_tokens=False`, and nothing else: no kwargs, padding, tensors or BatchEncoding.
Everything HuggingFace-shaped lives in `tokbackend.split`, which decides per call whether
a backend may answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


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

    def encode(self, text: str) -> list[int]:
        """Ids of one text, special/added tokens inside it matched as HuggingFace does."""
        ...

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of many texts; may use several threads."""
        ...


class BackendFactory(Protocol):
    """Builds an `EncodeBackend` from a loaded HuggingFace fast tokenizer.

    Keyword options come from `accelerate()` (e.g. `cache_budget_mib`); a factory ignores the
    ones that do not concern it.
    """

    def __call__(self, hf_tokenizer: PreTrainedTokenizerBase, **options: object) -> EncodeBackend: ...
