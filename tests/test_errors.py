"""One exception family: every exception class tokbackend defines derives from `TokbackendError`
(a signal the serving gate turns into an exit, like KeyboardInterrupt, aside), keeping the builtin
base callers catch; docs/errors.md has a row for each."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import tokbackend
from tokbackend import TokbackendError

# BaseExceptions on purpose: nothing on the way out may swallow them (docs/errors.md says why).
SIGNALS = {"GateInterrupted"}
# What callers catch today, kept.
BUILTIN_BASES = {
    "ModelNotFoundError": OSError,
    "ModelFilesError": ValueError,
    "MissingPackageDataError": FileNotFoundError,
    "BackendUnavailableError": RuntimeError,
    "BackendPanicError": RuntimeError,
    "FastPathError": RuntimeError,
    "GuardUnavailableError": RuntimeError,
}


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for module in pkgutil.walk_packages(tokbackend.__path__, "tokbackend."):
        if module.name.startswith("tokbackend.equivalence"):
            # the harness, installed inside the package (seen where the wheel is): a test tool whose
            # Disagreement is an AssertionError for pytest and hypothesis, caught by the gates
            continue
        try:
            loaded = importlib.import_module(module.name)
        except ImportError as error:  # a module only a server imports (sglang, vllm): read, not run
            assert error.name and not error.name.startswith("tokbackend"), error
            _assert_defines_no_exception(module.name)
            continue
        for name, value in vars(loaded).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == loaded.__name__:
                found[name] = value
    return found


def _assert_defines_no_exception(name: str) -> None:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(base) for base in node.bases]
            assert not any(base.endswith(("Error", "Exception")) for base in bases), f"{name}.{node.name}({bases})"


def test_every_exception_tokbackend_defines_derives_from_one_base():
    classes = _exception_classes()
    assert {"BackendUnavailableError", "FastPathError", "NoExactBackend", "DerivationOverBudget"} <= classes.keys()
    outside = sorted(
        name for name, kind in classes.items() if not issubclass(kind, TokbackendError) and name not in SIGNALS
    )
    assert not outside, f"not TokbackendErrors: {outside}"
    for name, base in BUILTIN_BASES.items():
        assert issubclass(classes[name], base), name


def test_the_errors_page_has_a_row_for_each_public_error():
    page = (Path(__file__).resolve().parent.parent / "docs" / "errors.md").read_text()
    public = [name for name in _exception_classes() if not name.startswith("_") and name not in {"NoExactBackend"}]
    missing = [name for name in public if f"`{name}`" not in page]
    assert not missing, missing
