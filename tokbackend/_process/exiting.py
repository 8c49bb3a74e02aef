"""Background work that an exiting process no longer needs, stopped between its steps.

tokbackend's background threads (a lane's warm-ups and spare instance) are not daemons: an
interpreter that finalizes while a daemon thread is inside a backend's native code aborts the
process. An exiting interpreter joins them instead, so a short-lived process (a script, a test
worker, one of several processes starting at once) used to wait seconds at exit for warm-ups
whose results nothing would use. `exiting()` turns True once the interpreter starts to exit,
before it joins those threads; the work checks it between its steps and stops. A step already
inside native code ends first.
"""

from __future__ import annotations

import threading

_exiting = threading.Event()
_watching = False


def watch_exit() -> None:
    """Have `exiting()` turn True when the interpreter starts to exit; called by whatever starts
    background work (`import tokbackend` registers nothing)."""
    global _watching
    if _watching:
        return
    _watching = True
    # threading's own exit hooks run before it joins the non-daemon threads (atexit's run after),
    # last registered first: concurrent.futures registers the join of its executors' threads on
    # import (a guard's scan runs on one), so it is imported first and ours runs before that join
    import concurrent.futures.thread  # noqa: F401

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - CPython has had it since 3.9
        return
    try:
        register(_exiting.set)
    except RuntimeError:  # the interpreter is exiting already
        _exiting.set()


def exiting() -> bool:
    """Whether the interpreter has started to exit (see the module docstring)."""
    return _exiting.is_set()
