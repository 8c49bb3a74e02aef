"""Whether this process is a child made by os.fork() (shared by backends with thread pools).

A Rust thread pool (rayon) created before os.fork() has no worker threads in the child, and
handing it work there waits forever. Backends therefore encode on the calling thread in a
forked child; spawned children are fresh interpreters and keep their parallel paths.
"""

from __future__ import annotations

import os

_forked = False


def _mark_forked() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


def in_forked_child() -> bool:
    """True in a process made by os.fork() (from a process that imported tokbackend)."""
    return _forked
