"""Counters of what the backend answered and of every hand-over to HuggingFace, by reason, and
`Stats`, the read-only view `tokenizer.tokbackend.stats()` returns."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tokbackend._policy import FallbackReason
from tokbackend._process.forking import fork_safe_lock

if TYPE_CHECKING:
    from tokbackend._metrics import Metrics

logger = logging.getLogger("tokbackend")


class AccelerationStats:
    """Thread-safe counters (each added to its Prometheus counter with `metrics`); the first
    hand-over of each reason is logged. The fast path takes no lock: each thread counts in cells of its own."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self._lock = fork_safe_lock(self, "_lock")
        self._fallbacks: Counter[str] = Counter()
        self._local = threading.local()
        self._cells: list[tuple[threading.Thread, list[int]]] = []  # [calls, texts, texts as arrays]
        self._ended = [0, 0, 0]

    def record_fast(self, texts: int, as_arrays: bool = False) -> None:
        """Count one call in which the backend answered `texts` texts (as `array('q')`s, or lists)."""
        try:
            cells = self._local.cells
        except AttributeError:
            cells = self._cells_of_this_thread()
        cells[0] += 1
        cells[1] += texts
        if as_arrays:
            cells[2] += texts
        if self._metrics is not None:
            self._metrics.fast_texts(texts)

    def _cells_of_this_thread(self) -> list[int]:
        cells = [0, 0, 0]
        with self._lock:
            live = []
            for thread, counted in self._cells:
                if thread.is_alive():
                    live.append((thread, counted))
                else:  # it writes no more: its counts are folded
                    self._ended = [total + count for total, count in zip(self._ended, counted)]
            live.append((threading.current_thread(), cells))
            self._cells = live
        self._local.cells = cells
        return cells

    def record_fallback(
        self, reason: FallbackReason, model: str, backend: str, cause: BaseException | str | None = None, texts: int = 1
    ) -> None:
        """Count `texts` hand-overs to HuggingFace; log the first of each reason (INFO, or WARNING
        for a backend that failed on valid input)."""
        with self._lock:
            first = reason.value not in self._fallbacks
            self._fallbacks[reason.value] += texts
        if self._metrics is not None:
            self._metrics.fallback_texts[reason](texts)
        if first:
            if isinstance(cause, BaseException):
                cause = f"{type(cause).__name__}: {cause}"
            logger.log(
                logging.WARNING if reason is FallbackReason.BACKEND_ERROR else logging.INFO,
                "%s encode for %s handed to HuggingFace (reason: %s%s); further calls with this reason "
                "are counted in tokenizer.tokbackend.stats() without logging",
                backend,
                model,
                reason.value,
                "" if cause is None else f": {cause}",
            )

    def snapshot(self) -> dict[str, Any]:
        """The counts: fast_calls, fast_texts, fast_texts_as_arrays and fallbacks by reason."""
        with self._lock:
            totals = [sum(column) for column in zip(self._ended, *(cells for _, cells in self._cells))]
            return {
                "fast_calls": totals[0],
                "fast_texts": totals[1],
                "fast_texts_as_arrays": totals[2],
                "fallbacks": dict(self._fallbacks),
            }


@dataclasses.dataclass(frozen=True, eq=False)
class Stats(Mapping[str, Any]):
    """What serves a tokenizer and what it answered: `tokenizer.tokbackend.stats()`.

    Read-only (assignment raises) and a mapping too: `stats["fast_texts"]` is `stats.fast_texts`,
    and the backend's own counters (`cache_renewals`, ...) are read by key. `as_dict()` is a
    plain dict, for `json.dumps`.

    >>> stats = tokenizer.tokbackend.stats()  # doctest: +SKIP
    >>> stats.backend, stats.backend_option, stats["fast_texts"]  # doctest: +SKIP
    ('fastokens', 'auto', 3)
    """

    backend: str  # what serves: the routing's backend, or "hf" while the fast path is off
    backend_option: str  # what `accelerate()` was asked for ("auto", "gigatoken", ...)
    model: str
    fast_path_enabled: bool
    disabled_reason: str | None
    routing: dict[str, str] | None  # {"backend", "reason"}
    probe_seconds: float
    guarded_code_points: int
    guard_record: str | None
    guard: str
    segment_cache: dict[str, Any]
    start_up: dict[str, str]  # {"phase": ...}
    fast_calls: int
    fast_texts: int
    fast_texts_as_arrays: int
    fallbacks: dict[str, int]
    backend_stats: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def __getitem__(self, key: str) -> Any:
        if key in _STATS_FIELDS:
            return getattr(self, key)
        return self.backend_stats[key]

    def __iter__(self) -> Iterator[str]:
        yield from _STATS_FIELDS
        yield from (key for key in self.backend_stats if key not in _STATS_FIELDS)

    def __len__(self) -> int:
        return len(set(_STATS_FIELDS) | self.backend_stats.keys())

    def as_dict(self) -> dict[str, Any]:
        """Every key and value as a plain dict (for `json.dumps`)."""
        return dict(self.items())


_STATS_FIELDS = tuple(field.name for field in dataclasses.fields(Stats) if field.name != "backend_stats")
