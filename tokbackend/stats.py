"""Counters of what the backend answered and of every hand-over to HuggingFace, by reason."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from tokbackend.backends.forking import fork_safe_lock
from tokbackend.policy import FallbackReason

logger = logging.getLogger("tokbackend")


class AccelerationStats:
    """Thread-safe counters; the first hand-over of each reason is logged."""

    def __init__(self) -> None:
        self._lock = fork_safe_lock(self, "_lock")
        self._fast_calls = 0
        self._fast_texts = 0
        self._fast_texts_as_arrays = 0
        self._fallbacks: Counter[str] = Counter()

    def record_fast(self, texts: int, as_arrays: bool = False) -> None:
        """Count one call in which the backend answered `texts` texts (as `array('q')`s, or lists)."""
        with self._lock:
            self._fast_calls += 1
            self._fast_texts += texts
            if as_arrays:
                self._fast_texts_as_arrays += texts

    def record_fallback(
        self, reason: FallbackReason, model: str, backend: str, cause: BaseException | str | None = None, texts: int = 1
    ) -> None:
        """Count `texts` hand-overs to HuggingFace; log the first of each reason: INFO for the
        routine ones (documented kwargs, the Unicode guard, bad input that HF rejects the same
        way), WARNING for a backend that failed on valid input."""
        with self._lock:
            first = reason.value not in self._fallbacks
            self._fallbacks[reason.value] += texts
        if first:
            if isinstance(cause, BaseException):
                cause = f"{type(cause).__name__}: {cause}"
            logger.log(
                logging.WARNING if reason.is_problem else logging.INFO,
                "%s encode for %s handed to HuggingFace (reason: %s%s); further calls with this reason "
                "are counted in tokenizer.tokbackend.stats() without logging",
                backend,
                model,
                reason.value,
                "" if cause is None else f": {cause}",
            )

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "fast_calls": self._fast_calls,
                "fast_texts": self._fast_texts,
                "fast_texts_as_arrays": self._fast_texts_as_arrays,
                "fallbacks": dict(self._fallbacks),
            }
