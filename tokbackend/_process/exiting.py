"""`exiting()`: True once the interpreter starts to exit, so background work stops between steps.

tokbackend's background threads are not daemons (a daemon thread inside a backend's native code
when the interpreter finalizes aborts the process), so an exiting interpreter joins them; work
whose result nothing would use checks `exiting()` between its steps and stops.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - its executors' join is hooked first, so ours runs before it
import threading

_exiting = threading.Event()
# threading's own exit hooks run before it joins the non-daemon threads (atexit's run after),
# last registered first. Hooked at import, once per process (a forked child inherits it).
try:
    threading._register_atexit(_exiting.set)  # type: ignore[attr-defined]
except RuntimeError:  # imported while the interpreter exits already
    _exiting.set()


def exiting() -> bool:
    """Whether the interpreter has started to exit (see the module docstring)."""
    return _exiting.is_set()
