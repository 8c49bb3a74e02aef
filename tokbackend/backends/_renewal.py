"""A memory bound for a backend whose caches grow without bound (gigatoken 0.10): renew it.

`RenewingBackend` adds up resident growth *during the wrapped backend's own calls* and, at half
of the budget (the rest is headroom for calls in flight), swaps in a spare built ahead of time,
whose fresh library object has empty caches, and builds the next spare in the background. Output
never depends on the caches, only speed; the cost is the spare's footprint and its builds.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable
from typing import Any, TypeVar

from tokbackend._process.memory import release_freed_memory, resident_bytes
from tokbackend._process.threads import OnItsOwnThread, exiting
from tokbackend.backends._arrays import encode_array, encode_batch_arrays
from tokbackend.backends._base import EncodeBackend, panics_as_errors

_T = TypeVar("_T")


class RenewingBackend:
    """Wraps `build()`'s backend; renews it when its calls have grown memory by half of `budget_mib`.

    >>> backend = RenewingBackend(lambda: GigatokenBackend(text), budget_mib=256)  # doctest: +SKIP
    """

    def __init__(self, build: Callable[[], EncodeBackend], budget_mib: int) -> None:
        self._build = build
        self._current = build()
        kind = type(self._current)
        self.name = kind.name
        self.is_reference = kind.is_reference
        self.needs_unicode_guard = kind.needs_unicode_guard
        self.versioned_libraries = kind.versioned_libraries
        self.guard_family = kind.guard_family
        self.grows_without_bound = False  # that is what this wrapper is for
        self._budget_bytes = int(budget_mib) << 20
        self._growth = 0
        # the prepared spare, when there is one (append and pop are atomic: no lock)
        self._spares: list[EncodeBackend] = []
        self.cache_renewals = 0

    def encode(self, text: str) -> list[int]:
        return self._measured(lambda backend: backend.encode(text))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self._measured(lambda backend: backend.encode_batch(texts))

    def encode_array(self, text: str) -> array[int]:
        return self._measured(lambda backend: encode_array(backend, text))

    def encode_batch_arrays(self, texts: list[str]) -> list[array[int]]:
        return self._measured(lambda backend: encode_batch_arrays(backend, texts))

    def stats(self) -> dict[str, Any]:
        return {**self._current.stats(), "cache_budget_mib": self._budget_bytes >> 20, "cache_renewals": self.cache_renewals}

    def prepare(self) -> None:
        """Prepare the serving instance and build the first spare, both here, while the build is
        made: a renewal is then an instant swap, and nothing runs beside the first requests (a
        gigatoken load or warm-up holds the GIL; on a thread after start-up they held up the
        first burst of a fresh process by up to a second). Spares are not warmed: one cold batch
        after a renewal costs less than a warm-up's pause of every Python thread while serving."""
        self._current.prepare()
        self._spares.append(self._build())

    def _measured(self, call: Callable[[EncodeBackend], _T]) -> _T:
        before = resident_bytes()
        result = call(self._current)
        after = resident_bytes()
        if before is not None and after is not None and after > before:
            # Unlocked on purpose: concurrent calls may count shared growth twice, which only
            # renews a little early.
            self._growth += after - before
            if self._growth >= self._budget_bytes // 2:
                self._renew()
        return result

    def _renew(self) -> None:
        try:
            spare = self._spares.pop()
        except IndexError:
            return  # the next spare is still being built
        self._current = spare  # in-flight calls finish on the old instance, which is then freed
        self.cache_renewals += 1
        OnItsOwnThread(self._next_spare, "tokbackend-spare")

    def _next_spare(self) -> None:
        """After a renewal, on a thread nobody waits for: free the old instance's memory and build
        the next spare; a failure is logged, and the serving instance serves on meanwhile."""
        time.sleep(0.1)  # let in-flight calls release the old instance
        release_freed_memory()
        try:
            with panics_as_errors(self.name, "building a spare instance"):
                self._add_spare()
        except Exception as error:  # noqa: BLE001 - reported here (a Rust panic too): nobody joins this thread
            logging.getLogger("tokbackend").warning("backend %s: building a spare instance failed: %s", self.name, error)

    def _add_spare(self) -> None:
        if exiting():  # nothing will serve with it (`tokbackend._process.threads`)
            return
        self._spares.append(self._build())
        # Growth seen while the spare was built is mostly the spare itself: start counting afresh.
        self._growth = 0
