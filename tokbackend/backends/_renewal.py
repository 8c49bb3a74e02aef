"""A memory bound for a backend whose caches grow without bound (gigatoken 0.10): renew it.

`RenewingBackend` adds up resident growth during the wrapped backend's own calls and, at a quarter
of the budget, builds a fresh instance on a thread of its own and swaps it in; the old one serves
meanwhile. Output never depends on the caches, only speed.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable
from typing import Any, TypeVar

from tokbackend._process.memory import release_freed_memory, resident_bytes
from tokbackend._process.threads import BackgroundThread, exiting
from tokbackend.backends._arrays import encode_array, encode_batch_arrays
from tokbackend.backends._base import EncodeBackend, PanicConverter

_T = TypeVar("_T")


class RenewingBackend:
    """Wraps `build()`'s backend; renews it when its calls have grown memory by a quarter of `budget_mib`.

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
        # the renewal last started: one at a time (a forked child finds its thread ended)
        self._renewal: BackgroundThread[None] | None = None
        # bumped as a renewal ends: a call spanning that counts no growth (the fresh instance's
        # load would count, and start the next renewal at once)
        self._epoch = 0
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
        return {
            **self._current.stats(),
            "cache_budget_mib": self._budget_bytes >> 20,
            "cache_renewals": self.cache_renewals,
        }

    def prepare(self) -> None:
        self._current.prepare()

    def _measured(self, call: Callable[[EncodeBackend], _T]) -> _T:
        epoch = self._epoch
        before = resident_bytes()
        result = call(self._current)
        after = resident_bytes()
        if before is not None and after is not None and after > before and epoch == self._epoch:
            # Unlocked on purpose: concurrent calls may count shared growth twice, which only
            # renews a little early, and two crossing at once may start two renewals, which
            # only wastes a build (each swaps in a fresh instance).
            self._growth += after - before
            if self._growth >= self._budget_bytes // 4 and (self._renewal is None or self._renewal.join(0)):
                self._renewal = BackgroundThread(self._renew, "tokbackend-renewal")
        return result

    def _renew(self) -> None:
        """On a thread nobody waits for: build a fresh instance and swap it in; a failure is logged,
        and the old instance serves on."""
        try:
            if exiting():  # nothing will serve with it (`tokbackend._process.threads`)
                return
            with PanicConverter(self.name, "building a fresh instance"):
                fresh = self._build()
            self._current = fresh
            self.cache_renewals += 1
            time.sleep(0.1)  # let in-flight calls release the old instance
            release_freed_memory()
        except Exception as error:  # noqa: BLE001 - reported here (a Rust panic too): nobody joins this thread
            logging.getLogger("tokbackend").warning(
                "backend %s: building a fresh instance failed: %s", self.name, error
            )
        finally:
            # growth seen meanwhile is mostly the fresh instance itself: count afresh (after a
            # failure, the next try comes after as much growth again)
            self._growth = 0
            self._epoch += 1
