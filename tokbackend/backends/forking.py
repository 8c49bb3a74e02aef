"""What a child made by os.fork() must not inherit: busy thread pools and held locks.

A Rust thread pool (rayon) created before os.fork() has no worker threads in the child, and
handing it work there waits forever. Backends therefore encode on the calling thread in a
forked child; spawned children are fresh interpreters and keep their parallel paths.

Likewise a lock that another thread held at the fork stays held in the child forever (that
thread does not exist there). Every lock tokbackend takes comes from `fork_safe_lock`, and the
child gets each one fresh: what it guarded is set in single steps, so at worst a count is off by
what the other thread was doing.
"""

from __future__ import annotations

import os
import threading
import weakref

_forked = False
# owner -> the attributes that hold its locks (a module for module-level locks)
_lock_owners: weakref.WeakKeyDictionary[object, tuple[str, ...]] = weakref.WeakKeyDictionary()


def fork_safe_lock(owner: object, attribute: str) -> threading.Lock:
    """A new lock, to be stored as `owner.attribute`, that a forked child finds released."""
    _lock_owners[owner] = (*_lock_owners.get(owner, ()), attribute)
    return threading.Lock()


def _after_fork_in_child() -> None:
    global _forked
    _forked = True
    for owner, attributes in list(_lock_owners.items()):
        for attribute in attributes:
            setattr(owner, attribute, threading.Lock())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def in_forked_child() -> bool:
    """True in a process made by os.fork() (from a process that imported tokbackend)."""
    return _forked
