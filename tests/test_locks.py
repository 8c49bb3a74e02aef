"""Every lock tokbackend takes is one a forked child finds released.

A lock another thread holds at `os.fork()` stays held in the child forever (that thread does not
exist there). `tokbackend._process.forking.fork_safe_lock` is the one way to make a lock; the only
other is a lock made again in the child, by a function the module's own after-fork hook calls
(`SettingsGate._open`; hooks are registered with `forking.after_fork_in_child`, the package's one
`os.register_at_fork`). Read from the source, so a plain lock added anywhere fails here.
Events are left out: no caller holds one, they are set and waited on.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tokbackend"
FACTORY = PACKAGE / "_process" / "forking.py"
LOCKS = {"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore"}


def _called_names(function: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            callee = node.func
            names.add(callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", ""))
    return names


def _remade_after_fork(tree: ast.Module) -> set[str]:
    """The functions the module's after-fork hooks call (those `@after_fork_in_child` decorates)."""

    def is_hook(decorator: ast.expr) -> bool:
        return getattr(decorator, "id", getattr(decorator, "attr", None)) == "after_fork_in_child"

    hooks = [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and any(map(is_hook, node.decorator_list))
    ]
    return {name for hook in hooks for name in _called_names(hook)}


def plain_locks(source: str, where: str) -> list[str]:
    """The places in `source` that make a lock neither by `fork_safe_lock` nor again after a fork."""
    tree = ast.parse(source)
    remade = _remade_after_fork(tree)
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Call):
                callee = child.func
                name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", None)
                module = getattr(getattr(callee, "value", None), "id", "threading")
                if name in LOCKS and module == "threading" and function not in remade:
                    found.append(f"{where}:{child.lineno} threading.{name}() in {function or 'the module'}")
            visit(child, function)

    visit(tree, None)
    return found


def test_every_lock_in_the_package_is_fork_safe():
    found = [
        place
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != FACTORY
        for place in plain_locks(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    ]
    assert found == [], "make these with tokbackend._process.forking.fork_safe_lock"


def test_a_plain_lock_is_found_and_one_remade_after_a_fork_is_not():
    planted = textwrap.dedent(
        """
        import threading
        from threading import RLock
        from tokbackend._process.forking import after_fork_in_child

        class Cache:
            def __init__(self):
                self.lock = threading.Lock()
                self.other = RLock()

        class Gate:
            def _open(self):
                self.condition = threading.Condition(threading.Lock())

        @after_fork_in_child
        def _after_fork_in_child():
            GATE._open()
        """
    )
    assert plain_locks(planted, "planted.py") == [
        "planted.py:8 threading.Lock() in __init__",
        "planted.py:9 threading.RLock() in __init__",
    ]


def test_only_the_fork_module_hooks_fork():
    """One after-fork hook: a module that needs something reset in a forked child registers it with
    `forking.after_fork_in_child` (run after the locks are fresh), never a hook of its own."""
    hooking = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if "register_at_fork" in path.read_text() and path != FACTORY
    )
    assert hooking == []
