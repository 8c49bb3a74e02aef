"""What a child made by os.fork() must not inherit: busy thread pools, held locks, pending work.

The one place tokbackend hooks `os.fork()` (`tests/test_locks.py` checks that no other module
calls `os.register_at_fork`):

- A Rust thread pool (rayon) created before the fork has no worker threads in the child, and
  handing it work there waits forever. Backends therefore encode on the calling thread in a
  forked child (`in_forked_child`); spawned children are fresh interpreters and keep their
  parallel paths.
- A lock that another thread held at the fork stays held in the child forever (that thread does
  not exist there). Every lock tokbackend takes comes from `fork_safe_lock`, and the child gets
  each one fresh: what it guarded is set in single steps, so at worst a count is off by what the
  other thread was doing.
- What else a module keeps for this process alone (work a thread of the parent was doing, a
  descriptor of the parent's /proc entry) it resets in a hook of its own, registered with
  `after_fork_in_child`; work the child must not be forked in the middle of registers a wait
  with `before_fork`. The child's hooks run after its locks are fresh, in registration order.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

# this process's pid when tokbackend was imported: a forked child's own differs
_IMPORTED_IN = os.getpid()
# owner -> the attributes that hold its locks (a module for module-level locks)
_lock_owners: weakref.WeakKeyDictionary[object, tuple[str, ...]] = weakref.WeakKeyDictionary()


def fork_safe_lock(owner: object, attribute: str) -> threading.Lock:
    """A new lock, to be stored as `owner.attribute`, that a forked child finds released."""
    _lock_owners[owner] = (*_lock_owners.get(owner, ()), attribute)
    return threading.Lock()


def after_fork_in_child(hook: Callable[[], object]) -> Callable[[], object]:
    """Run `hook()` in every child os.fork() makes from now on, once its locks are fresh (the
    child runs its hooks in the order they were registered, the locks' first); returns `hook`, so
    that it can decorate the module's reset function."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=hook)
    return hook


def before_fork(hook: Callable[[], object]) -> Callable[[], object]:
    """Run `hook()` in the parent before every os.fork() from now on (it must return: the fork
    waits for it); returns `hook`. Hooked when asked, not at import: CPython runs the hooks
    registered last first, and this one must run before those of the libraries imported by then
    (logging's takes the logging lock, which a thread the hook waits for may need)."""
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
