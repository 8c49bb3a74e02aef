"""The backends' libraries, imported on a background thread when `tokbackend.preload()` asks.

A library's first import is start-up work that need not wait for `accelerate()`: awkward, which
gigatoken's batch calls import on their first use, takes about as long as HuggingFace's whole
load of a 32k-piece vocabulary (bench/RESULTS.md). Imported while the process does other things
(a server loads its weights, parses its arguments, starts its workers), it is gone from the
first build's time. `import tokbackend` starts nothing: the SGLang and vLLM plugins ask for it, in
every process they register in. Off with TOKBACKEND_PRELOAD=0.

A child that os.fork() makes while another thread is importing a module would find that
module's import lock held forever: a fork waits for the thread to end (5 s at most) first.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from collections.abc import Callable

from tokbackend._process.forking import before_fork
from tokbackend._process.threads import OnItsOwnThread

PRELOAD_ENV = "TOKBACKEND_PRELOAD"
_FORK_WAIT_S = 5.0

_thread: OnItsOwnThread[None] | None = None


def start(then: Callable[[], None] | None = None) -> None:
    """Import, on a thread of its own, each installed library the built-in backends declare
    (`preloads`; a backend from an entry point is imported where it is used), then run `then`
    (the package's own first-build imports). Not a daemon: an interpreter that exits meanwhile
    waits for the imports to end rather than stopping a thread inside an extension module's
    initialization."""
    global _thread
    if os.environ.get(PRELOAD_ENV, "1") == "0" or _thread is not None:
        return
    before_fork(_wait_before_a_fork)
    _thread = OnItsOwnThread(lambda: _run(then), "tokbackend-preload")


def _run(then: Callable[[], None] | None) -> None:
    from tokbackend.backends import BUILTIN_BACKENDS, backend_class

    for name in BUILTIN_BACKENDS:
        try:
            for module in getattr(backend_class(name), "preloads", ()):
                if importlib.util.find_spec(module) is not None:
                    importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a library that fails to import fails again, loudly, where it is used
            continue
    if then is not None:
        with contextlib.suppress(Exception):  # the same work is done, and fails loudly, where it is needed
            then()


def _wait_before_a_fork() -> None:
    # bounded: a fork from inside an import the thread waits for would otherwise never happen
    wait(_FORK_WAIT_S)


def started() -> bool:
    """Whether this process has started the imports (`start`)."""
    return _thread is not None


def wait(timeout: float | None = None) -> bool:
    """Wait for the imports to end; True when they have (or never started)."""
    thread = _thread
    return thread is None or thread.join(timeout)
