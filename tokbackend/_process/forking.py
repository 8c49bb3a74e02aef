"""What a child made by os.fork() must not inherit; the one place tokbackend hooks `os.fork()`.

- A Rust thread pool has no workers in a forked child: backends encode on the calling thread there
  (`in_forked_child`).
- A lock another thread held at the fork stays held in the child: every lock comes from
  `fork_safe_lock`, and the child gets each one fresh.
- Anything else a module keeps for this process it resets in an `after_fork_in_child` hook; work
  the child must not be forked in the middle of registers a wait with `before_fork`.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

# this process's pid when tokbackend was imported: a forked child's own differs
_IMPORTED_IN = os.getpid()
# owner -> the attributes that hold its locks: what a forked child must make afresh
_lock_owners: weakref.WeakKeyDictionary[object, tuple[str, ...]] = weakref.WeakKeyDictionary()


def fork_safe_lock(owner: object, attribute: str) -> threading.Lock:
    """A new lock, to be stored as `owner.attribute`, that a forked child finds released."""
    _lock_owners[owner] = (*_lock_owners.get(owner, ()), attribute)
    return threading.Lock()


def after_fork_in_child(hook: Callable[[], object]) -> Callable[[], object]:
    """Run `hook()` in every child os.fork() makes from now on; returns `hook` (a decorator)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=hook)
    return hook


def before_fork(hook: Callable[[], object]) -> Callable[[], object]:
    """Run `hook()` in the parent before every os.fork() from now on; the fork waits for it.

    Hooked when asked, not at import: CPython runs the hooks registered last first, and this one
    must run before those of libraries imported by then (logging's takes the logging lock, which
    a thread the hook waits for may need).
    """
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=hook)
    return hook


@after_fork_in_child
def _fresh_locks() -> None:
    for owner, attributes in list(_lock_owners.items()):
        for attribute in attributes:
            setattr(owner, attribute, threading.Lock())


def in_forked_child() -> bool:
    """True in a process made by os.fork() (from a process that imported tokbackend)."""
    return os.getpid() != _IMPORTED_IN
