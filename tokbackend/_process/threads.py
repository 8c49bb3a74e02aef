"""Work on a thread of its own: the one place tokbackend starts a thread (a guard's scan has a
pool of its own). A backend's load beside its guard's derivation (`tokbackend._routing.lanes`),
the backends' warm-ups after `accelerate()` (`tokbackend._build`), a renewing backend's spare
(`tokbackend.backends._renewal`), the libraries' imports (`tokbackend._process.preload`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class OnItsOwnThread(Generic[T]):
    """`work()` running on a thread of its own; `result()` waits for it, raising what it raised;
    `join(timeout)` waits without raising. Not a daemon: an interpreter that exits meanwhile
    waits for it rather than stopping it inside a library's native code (work that nothing
    would use after an exit checks `tokbackend._process.exiting` between its steps). Work that
    nobody waits for catches and reports its own errors."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._work = work
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as error:  # noqa: BLE001 - handed to the caller by result()
            self._error = error

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the work to end (at most `timeout` seconds); True when it has."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()
