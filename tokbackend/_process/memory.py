"""This process's memory: its resident set, and handing freed memory back to the OS."""

from __future__ import annotations

import contextlib
import ctypes
import os

from tokbackend._process.forking import after_fork_in_child

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# /proc/self/statm, kept open: a pread is cheaper than opening it again, and a renewing backend
# reads it twice a call. /proc/self is resolved at open, so a forked child drops the parent's.
_statm: list[int] = []


def resident_bytes() -> int | None:
    """This process's resident set size, or None where /proc is not available."""
    try:
        if not _statm:
            _statm.append(os.open("/proc/self/statm", os.O_RDONLY))
        return int(os.pread(_statm[0], 64, 0).split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


@after_fork_in_child
def _reopen_statm_in_child() -> None:
    if _statm:
        with contextlib.suppress(OSError):
            os.close(_statm.pop())


def release_freed_memory() -> None:
    """Hand freed memory back to the OS (glibc keeps it in its arenas, hiding a cache's drop)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)
