"""The build that follows an early start's, made on one process-wide executor thread.

An early start's build (`Build.final` False) carries `next`, a `Successor`: a
`concurrent.futures.Future` of the final (or failed) build, run once per process on the one
worker thread of this module's executor, whichever tokenizer copy serving the build asks first.
Its work waits for a pause in the calls of the build it finishes (`Successor.arrive`/`leave`,
counted over every state serving it), since it holds the GIL for long stretches.

- The worker is not a daemon (a daemon thread still inside a backend's native code when the
  interpreter finalizes aborts the process): concurrent.futures joins it at exit, after
  `tokbackend.backends.exiting` has turned `exiting()` on, so work not begun is skipped and the
  wait for a pause ends (`exiting.watch_exit` keeps that order).
- A fork: the child has no executor (its thread stayed in the parent). Every successor not
  finished at the fork is set back to pending there (an after-fork hook,
  `tokbackend.backends.forking`), and the child's first call on the build, or
  `wait_until_final`, submits it to an executor of the child's own: a child forked while the
  parent was finishing the build finishes it itself.
"""

from __future__ import annotations

import concurrent.futures
import logging
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

from tokbackend.backends.exiting import watch_exit
from tokbackend.backends.forking import after_fork_in_child, fork_safe_lock

logger = logging.getLogger("tokbackend")

_now, _sleep = time.monotonic, time.sleep  # the clock of the wait for a pause (tests run it by hand)

# An early start's finishing work holds the GIL for long stretches (fastokens' load of a large
# vocabulary: its first 0.35-0.55 s): it starts in a pause of this long in the calls, so that the
# first calls after accelerate() (a server's first requests) are not made to wait for it, and
# waits for one at most UPGRADE_PATIENCE_S, so that a process that never pauses gets it too.
UPGRADE_PAUSE_S = 0.05
UPGRADE_PATIENCE_S = 2.0

_lock = fork_safe_lock(sys.modules[__name__], "_lock")
_executor: concurrent.futures.ThreadPoolExecutor | None = None
# successors not finished yet, which a forked child sets back to pending
_unfinished: weakref.WeakSet[Successor] = weakref.WeakSet()
_UNSET = object()


class Successor(concurrent.futures.Future):
    """`work(successor)`, run once per process on the executor thread (`start()`); see the
    module docstring. `seconds`: from its submission to its result. Followers (`follow`) are
    told when it finishes, on the worker thread."""

    def __init__(self, work: Callable[[Successor], Any]) -> None:
        super().__init__()
        self._work = work
        self._submitted = False  # to this process's executor (a forked child's hook resets it)
        self._submitted_at = 0.0
        self._value: object = _UNSET  # what it finished with, kept for a child forked mid-set_result
        self.seconds: float | None = None
        self._followers: list[weakref.WeakMethod] = []
        self._followers_lock = fork_safe_lock(self, "_followers_lock")
        self._last_call = 0.0  # when a call last arrived or ended
        self._in_flight: list[None] = []  # one item per call still running (append, pop: atomic)
        _unfinished.add(self)

    # -- running ----------------------------------------------------------------------------

    def start(self) -> None:
        """Submit the work in this process, unless submitted here already or finished."""
        if self._submitted:
            return
        with _lock:
            if self._submitted or self.done():
                return
            global _executor
            if _executor is None:
                watch_exit()  # before the executor's thread exists: see `tokbackend.backends.exiting`
                _executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokbackend-successor")
            try:
                _executor.submit(self._run)
            except RuntimeError:  # the interpreter is exiting: nothing would serve with it
                return
            self._submitted, self._submitted_at = True, time.perf_counter()

    def _run(self) -> None:
        if not self.set_running_or_notify_cancel():
            return
        try:
            value = self._work(self)
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on it
            logger.error("tokbackend: finishing the start-up build raised %s: %s", type(error).__name__, error, exc_info=error)
            self.set_exception(error)
            _unfinished.discard(self)
            return
        self.seconds = time.perf_counter() - self._submitted_at
        self._value = value
        self.set_result(value)
        with self._followers_lock:
            followers, self._followers = self._followers, []
        _unfinished.discard(self)
        for follower in followers:
            method = follower()
            if method is None:
                continue
            try:
                method(self)
            except Exception:  # noqa: BLE001 - one follower's failure must not stop the others
                logger.exception("tokbackend: swapping in the start-up build failed")

    def follow(self, method: Callable[[Successor], None]) -> bool:
        """Have the bound `method(self)` called (on the worker thread) when this finishes; held
        weakly. False, and nothing registered, when it has finished already."""
        with self._followers_lock:
            if self.done():
                return False
            follower = weakref.WeakMethod(method)
            if follower not in self._followers:  # a state that follows it already
                self._followers.append(follower)
            return True

    def _rearm(self) -> None:
        """In a child forked before this finished: pending again (the thread running it stayed
        in the parent), or finished with what the parent had just finished it with."""
        concurrent.futures.Future.__init__(self)  # a fresh condition: the parent's may be held
        self._submitted = False
        self._in_flight = []  # the parent's calls in flight are not the child's
        if self._value is not _UNSET:
            self.set_result(self._value)

    # -- the pause in the calls ---------------------------------------------------------------

    def arrive(self) -> None:
        """A call serving the build this finishes has begun."""
        self._last_call = _now()
        self._in_flight.append(None)

    def leave(self) -> None:
        """A call that `arrive`d has ended."""
        self._in_flight.pop()
        self._last_call = _now()

    def wait_for_a_pause(self, stop: Callable[[], bool]) -> None:
        """Until no call has run for UPGRADE_PAUSE_S (counting from now: accelerate() has just
        returned, its first calls are coming; a long call in flight, such as a burst's batch,
        is no pause), or UPGRADE_PATIENCE_S have passed, or `stop()`."""
        began = _now()
        while True:
            now = _now()
            quiet = 0.0 if self._in_flight else now - max(self._last_call, began)
            if quiet >= UPGRADE_PAUSE_S or now - began >= UPGRADE_PATIENCE_S or stop():
                return
            _sleep(min(UPGRADE_PAUSE_S - quiet, UPGRADE_PATIENCE_S - (now - began)))


@after_fork_in_child
def _after_fork_in_child() -> None:
    global _executor
    _executor = None  # its thread stayed in the parent
    for successor in list(_unfinished):
        successor._rearm()
