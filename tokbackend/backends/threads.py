"""Work on a thread of its own, whose result the caller waits for: a backend's load beside its
guard's derivation (`tokbackend.routing.lanes`), the candidates of a scan (`tokbackend.guard.scan`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class OnItsOwnThread(Generic[T]):
    """`work()` running on a thread of its own; `result()` waits for it, raising what it raised.
    Not a daemon: every caller joins it, and an interpreter that exits meanwhile waits for it
    rather than stopping it inside a library's native code."""

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
        return self._value
