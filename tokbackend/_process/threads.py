"""`BackgroundThread`: the one place tokbackend starts a thread (a guard's scan has a pool of its
own). `exiting()`: whether such work should stop between its steps.

The threads are not daemons (a daemon thread inside native code at finalization aborts the
process), so an exiting interpreter joins them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def exiting() -> bool:
    """Whether the interpreter has started to exit (a private flag of CPython's; where missing,
    background work runs to its end)."""
    return bool(getattr(threading, "_SHUTTING_DOWN", False))


class BackgroundThread(Generic[T]):
    """`work()` on a thread of its own; `result()` waits and raises what it raised, `join()` waits only.

    Not a daemon (see the module docstring). Work that nobody waits for reports its own errors.
    """

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
        """The work's value, once it has ended; what it raised is raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the work to end (at most `timeout` seconds); True when it has."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()
