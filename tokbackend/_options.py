"""`AccelerationOptions`: every choice `accelerate()` and `load()` take, in one typed object."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from tokbackend._guard import GuardSettings
from tokbackend._routing.names import AUTO, check_backend_name
from tokbackend._segments import DEFAULT_SEGMENT_CACHE_MIB
from tokbackend.backends._base import DEFAULT_CACHE_BUDGET_MIB

# The backend `accelerate()`, `load()` and the `tokbackend` commands use when none is named.
DEFAULT_BACKEND = AUTO

UnicodeGuardMode = Literal["derive", "refuse", "off"]


@dataclasses.dataclass(frozen=True)
class AccelerationOptions:
    """How a tokenizer is accelerated.

    backend: a registered backend name ("gigatoken", "fastokens", "hf", ...) or "auto" (per
        model, the fastest backend that is exact for it).
    strict: raise `FastPathError` when the boot probe finds a mismatch, instead of logging an
        error and serving every encode from HuggingFace.
    probe: run the boot probe (edge strings compared with HuggingFace) when a backend is built.
    allow_hf_fallback: when the backend cannot load this tokenizer, log and serve with
        HuggingFace instead of raising `BackendUnavailableError`.
    unicode_guard: when no guard record matches the installed versions: "derive" (scan every
        code point once, then cached), "refuse" (fast path off, logged; an error with
        strict=True), or "off" (no guard: only for backends known to be exact).
    cache_budget_mib: how far the caches of a backend that never evicts (gigatoken) may grow the
        resident memory: at a quarter of it a fresh instance is swapped in; None: unbounded.
    segment_cache_mib: the segment cache's budget (docs/segment-cache.md); None turns it off.
    segment_cache_steps_aside: while the traffic reuses less than an eighth of its text, most
        calls skip the segment cache (a sampled eighth keep looking). False: every call uses it.
    guard: where guard records are read from and what a derivation at accelerate() time may
        scan and spend (`GuardSettings`).
    """

    backend: str = DEFAULT_BACKEND
    strict: bool = False
    probe: bool = True
    allow_hf_fallback: bool = False
    unicode_guard: UnicodeGuardMode = "derive"
    cache_budget_mib: int | None = DEFAULT_CACHE_BUDGET_MIB
    segment_cache_mib: int | None = DEFAULT_SEGMENT_CACHE_MIB
    segment_cache_steps_aside: bool = True
    guard: GuardSettings = GuardSettings()

    def __post_init__(self) -> None:
        check_backend_name(self.backend)  # fail early, with the list of known names, on a typo
        if self.unicode_guard not in ("derive", "refuse", "off"):
            raise ValueError(f'unicode_guard must be "derive", "refuse" or "off", got {self.unicode_guard!r}')
        if not isinstance(self.guard, GuardSettings):
            raise TypeError(f"guard must be a tokbackend GuardSettings, got {type(self.guard).__name__}")
        for name in ("cache_budget_mib", "segment_cache_mib"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive number of MiB or None, got {value!r}")

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """Every option's name."""
        return frozenset(field.name for field in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> AccelerationOptions:
        """A copy with `changes`; an unknown name raises TypeError naming the valid ones."""
        unknown = sorted(set(changes) - self.field_names())
        if unknown:
            raise TypeError(
                f"unknown acceleration option {unknown[0]!r}; options: {', '.join(sorted(self.field_names()))}"
            )
        return dataclasses.replace(self, **changes)
