"""Count what the issue counts in tokbackend/: module-level mutable state, thread and lock sites, lines.

    python bench/module_state.py [TREE]

Module-level mutable state: a name bound at module level to a mutable container literal or
constructor (dict, list, set, Counter, WeakValueDictionary, ...), an Event, a ContextVar or a
counter, or any name a function rebinds with `global`. Read-only tables (MappingProxyType,
frozenset, tuple) and `__all__` are not state. A lock site is a call that creates a lock
(`fork_safe_lock`, `threading.Lock`, a Condition with its lock counted once), outside
`_process/forking.py`, which implements `fork_safe_lock`."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MUTABLE_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "Counter",
        "defaultdict",
        "OrderedDict",
        "deque",
        "WeakValueDictionary",
        "WeakKeyDictionary",
        "WeakSet",
        "Event",
        "ContextVar",
        "count",
        "local",
        "bytearray",
    }
)
THREAD_CALLS = frozenset({"Thread", "ThreadPoolExecutor", "Timer", "start_new_thread"})
LOCK_CALLS = frozenset(
    {"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "allocate_lock", "fork_safe_lock"}
)


def called_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Attribute):
            return function.attr
        if isinstance(function, ast.Name):
            return function.id
    return None


def mutable(value: ast.AST | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    return called_name(value) in MUTABLE_CALLS if value is not None else False


def scan(path: Path, root: Path) -> tuple[list[str], int, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = str(path.relative_to(root))
    names = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if targets and mutable(node.value):
            names.update(t.id for t in targets if isinstance(t, ast.Name) and t.id != "__all__")
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
    nested = {id(arg) for node in ast.walk(tree) if called_name(node) == "Condition" for arg in node.args}
    calls = [called_name(node) for node in ast.walk(tree) if id(node) not in nested]
    if path.name == "forking.py":  # the mechanism that makes the others fork-safe, not a lock of its own
        calls = [name for name in calls if name not in LOCK_CALLS]
    threads = sum(name in THREAD_CALLS for name in calls)
    locks = sum(name in LOCK_CALLS for name in calls)
    return [f"{module}:{name}" for name in sorted(names)], threads, locks


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = sorted((root / "tokbackend").rglob("*.py"))
    state, threads, locks = [], 0, 0
    for path in files:
        found, thread_sites, lock_sites = scan(path, root)
        state += found
        threads += thread_sites
        locks += lock_sites
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    print(f"lines {lines} in {len(files)} modules; thread sites {threads}; lock sites {locks}")
    print(f"module-level mutable state: {len(state)}")
    for name in state:
        print(f"  {name}")


if __name__ == "__main__":
    main()
