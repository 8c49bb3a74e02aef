"""The package's architecture: every module imports only from the layers below its own.

The layers, bottom first. A module may import (at run time; imports for type checking only are
left out) from its own layer and the layers below, never from a layer above, and the imports
form no circle. Adding a module means naming its layer here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tokbackend"

LAYERS = [
    # plain primitives: versions, paths, reading tokenizer.json, the backends below the cut
    ["version", "cache", "package_data", "hf_import", "tokenizer_json", "models", "backends", "policy", "stats"],
    # what the backends are served with: the Unicode guard, the segment cache
    ["guard", "segments"],
    # which backend answers what (the only place that knows "auto"), the probe that admits it
    ["reference", "probe", "routing"],
    # one build of the fast path and the state that serves with it
    ["options", "successors", "build", "state"],
    # the HuggingFace-facing class, and what is built on it
    ["watch", "shared_settings", "encoding", "tokenizer", "loading", "integrations", "verify", "cli", "__init__"],
]


def _layer_of(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else "__init__"
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"tokbackend module {module} is in no layer of tests/test_layout.py")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _runtime_imports(path: Path) -> set[str]:
    """The tokbackend modules `path` imports outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text())
    type_checking = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for child in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_checking:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tokbackend"):
            found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if (PACKAGE.parent / node.module.replace(".", "/") / alias.name).exists()
                or (PACKAGE.parent / (node.module.replace(".", "/") + "/" + alias.name + ".py")).exists()
            )
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tokbackend"))
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(path): _runtime_imports(path) for path in PACKAGE.rglob("*.py")}


def test_every_module_imports_only_from_its_layer_and_below():
    upward = [
        f"{module} (layer {_layer_of(module)}) imports {imported} (layer {_layer_of(imported)})"
        for module, imports in sorted(_graph().items())
        for imported in sorted(imports)
        if imported != "tokbackend" and _layer_of(imported) > _layer_of(module)
    ]
    assert not upward, "\n".join(upward)


def test_nothing_below_the_hf_facing_class_imports_it():
    below = [module for module, imports in _graph().items() if "tokbackend.tokenizer" in imports]
    assert all(_layer_of(module) >= _layer_of("tokbackend.tokenizer") for module in below), below


def test_the_imports_form_no_circle():
    graph = _graph()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            raise AssertionError("import circle: " + " -> ".join((*path[path.index(module) :], module)))
        if module in done:
            return
        for imported in graph.get(module, ()):
            if imported.startswith(module + ".") or imported == "tokbackend":
                continue  # a package importing its own modules
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())


def test_only_routing_knows_auto_and_only_backends_name_a_backend():
    concrete = ("gigatoken", "fastokens", "HFBackend", "GigatokenBackend", "FastokensBackend")
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        if module.startswith(("tokbackend.backends", "tokbackend.routing")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value == "auto":
                offenders.append(f"{module}: the literal 'auto'")
            if isinstance(node, ast.Constant) and node.value in concrete[:2]:
                offenders.append(f"{module}: the backend name {node.value!r}")
            if isinstance(node, ast.Name) and node.id in concrete[2:]:
                offenders.append(f"{module}: {node.id}")
    assert not offenders, "\n".join(sorted(offenders))
