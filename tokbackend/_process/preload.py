"""What the first `accelerate()` would import, imported on a background thread when
`tokbackend.preload()` asks (the package says what: this layer knows no backend).

A library's first import (awkward's is long) need not wait for `accelerate()`: done while a server
does other start-up work, it leaves the first build's time. `import tokbackend` starts nothing. Off
with TOKBACKEND_PRELOAD=0. A fork waits for the thread first (5 s at most): a child forked mid-
import would find the import lock held.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable

from tokbackend._process.forking import before_fork
from tokbackend._process.threads import BackgroundThread

PRELOAD_ENV = "TOKBACKEND_PRELOAD"
_FORK_WAIT_S = 5.0  # bounded: a fork from inside an import the thread waits for would never happen

# the one preload of this process, once started (`wait` joins it, `start` starts no second)
_thread: BackgroundThread[None] | None = None


def start(imports: Callable[[], None]) -> None:
    """Run `imports` (the package's first-build imports) on a thread of its own; not a daemon, so
    an exit waits for it rather than stopping it inside an extension module's initialization."""
    global _thread
    if os.environ.get(PRELOAD_ENV, "1") == "0" or _thread is not None:
        return
    before_fork(functools.partial(wait, _FORK_WAIT_S))
    _thread = BackgroundThread(lambda: _run(imports), "tokbackend-preload")


def _run(imports: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):  # the same work is done, and fails loudly, where it is needed
        imports()


def started() -> bool:
    """Whether this process has started the imports (`start`)."""
    return _thread is not None


def wait(timeout: float | None = None) -> bool:
    """Wait for the imports to end; True when they have (or never started)."""
    thread = _thread
    return thread is None or thread.join(timeout)
