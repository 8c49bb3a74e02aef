"""For development only, never installed: with this checkout on `PYTHONPATH`, `tokbackend.equivalence`
imports from its `equivalence/` folder, as the wheel and `pip install -e .` lay the package out.

The wheel maps the repository's `equivalence/` folder to the subpackage `tokbackend.equivalence`
(`package-dir` in pyproject.toml); `tokbackend/` on the path alone cannot show it there. Python
imports the first `sitecustomize` module on `sys.path` at start-up, so `PYTHONPATH=<checkout>`
(CONTRIBUTING.md) brings this finder, which answers for that one name, and only while `tokbackend`
itself was imported from this checkout (an installed tokbackend brings its own harness). It goes
first, so another checkout's editable install cannot hand this tree's tokbackend its harness.
The wheel holds no file outside `tokbackend/` (tests/test_packaging.py checks).
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent


class _HarnessOfThisCheckout:
    """A meta path finder for `tokbackend.equivalence` alone: `<checkout>/equivalence`."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname != "tokbackend.equivalence":
            return None
        package = sys.modules.get("tokbackend")
        origin = getattr(package, "__file__", None)
        if origin is None or Path(origin).resolve().parent != _CHECKOUT / "tokbackend":
            return None
        return PathFinder.find_spec(fullname, [str(_CHECKOUT)])


sys.meta_path.insert(0, _HarnessOfThisCheckout)  # type: ignore[arg-type]
