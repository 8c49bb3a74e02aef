"""The package's architecture: every module imports only from the layers below its own.

The layers, bottom first. A module may import from its own layer and the layers below, never
from a layer above, and the imports form no circle. Every import counts: those made only for type
checking and those inside functions too (a circle of them is still two modules that cannot be
read, or changed, one without the other). Adding a module means naming its layer here.

An entry is a module or a package of `tokbackend` (a package's modules are in its layer), or one
module of a package where the package's own modules are layered (`_routing.auto` above
`_routing.choices`): the entry naming the most of a module's path decides. A package's
`__init__` is its own entry (`_routing`, the routing the rest reads, above `_routing.auto`,
which it dispatches to): a module importing its package by name (`from tokbackend._routing import
choices`) imports that `__init__`.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tokbackend"

LAYERS = [
    # plain primitives: versions, paths, reading tokenizer.json, process utilities (fork safety,
    # threads, exit, memory)
    [
        "_version",
        "_errors",
        "_cache_dir",
        "_package_data",
        "_hf_import",
        "_tokenizer_json",
        "_added_tokens",
        "_process",
        "_models",
        "_policy",
        "_stats",
        "_metrics",
        "_wording",
    ],
    # the backends below the cut (run on the process utilities, which know no backend)
    ["backends"],
    # what the backends are served with: the Unicode guard, the segment cache
    ["_guard", "_segments"],
    # the names `backend=` and the server flags take (below the options, which check them)
    ["_routing.names"],
    # what accelerate() was asked for, the reference it is held to, the probe admitting a backend
    ["_options", "_reference", "_probe"],
    # which backend answers what (the only place that knows "auto"): a backend's lane, auto's
    # remembered choices, auto's choosing, and the routing the build reads, which dispatches to them
    ["_routing.lanes", "_routing.choices"],
    ["_routing.auto"],
    ["_routing"],
    # one build of the fast path and the state that serves with it
    ["_build", "_state"],
    # the HuggingFace-facing class, and what is built on it
    ["_watch", "_shared_settings", "_lazy_encodings", "_tokenizer", "_loading"],
    # the exactness harness (tokbackend.equivalence, the repository's equivalence/ folder: only the
    # gates import it, test below), then the gate that runs it
    ["equivalence"],
    ["_verify"],
    # the server plugins (and the SGLang gate, which reads verify's exit codes), the CLI, the package
    ["integrations"],
    ["_cli"],
    ["__init__"],
]


def _layer_of(module: str, layers: list[list[str]] = LAYERS) -> int:
    """The layer of the entry naming the most of `module`'s path (`tokbackend._routing.auto`:
    `_routing.auto`, before `_routing`)."""
    path = module.split(".")[1:] or ["__init__"]
    for length in range(len(path), 0, -1):
        entry = ".".join(path[:length])
        for index, names in enumerate(layers):
            if entry in names:
                return index
    raise AssertionError(f"tokbackend module {module} is in no layer of tests/test_layout.py")


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _imports(path: Path, package: Path = PACKAGE) -> set[str]:
    """The modules of `package` that `path` imports, anywhere in it (`if TYPE_CHECKING:` blocks
    and function bodies too); `from package import module` is the module."""
    root, found = package.name, set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == root:
            found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if (package.parent / node.module.replace(".", "/") / alias.name).exists()
                or (package.parent / (node.module.replace(".", "/") + "/" + alias.name + ".py")).exists()
            )
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == root)
    return found


def _graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    return {_module_name(path, package): _imports(path, package) for path in package.rglob("*.py")}


def _upward(graph: dict[str, set[str]], layers: list[list[str]] = LAYERS) -> list[str]:
    """Each import of `graph` that runs up a layer."""
    root = next(iter(graph)).split(".")[0]
    return [
        f"{module} (layer {_layer_of(module, layers)}) imports {imported} (layer {_layer_of(imported, layers)})"
        for module, imports in sorted(graph.items())
        for imported in sorted(imports)
        if imported != root and _layer_of(imported, layers) > _layer_of(module, layers)
    ]


def test_every_module_imports_only_from_its_layer_and_below():
    upward = _upward(_graph())
    assert not upward, "\n".join(upward)


def test_an_import_up_a_layer_inside_a_package_is_found(tmp_path):
    """Planted, one of each arrow issue 53 found: a primitive that imports what runs on it (the
    preload importing the backends), a package's module importing the package that dispatches to
    it (`auto` naming `_routing`), a gate importing the plugins that import it (`_verify` and
    `integrations`)."""
    package = tmp_path / "planted"
    for folder in ("", "_process", "backends", "_routing", "integrations"):
        (package / folder).mkdir(exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    (package / "_process" / "preload.py").write_text("def run():\n    from planted.backends import names\n")
    (package / "backends" / "names.py").write_text("import planted._process.preload\n")
    (package / "_routing" / "__init__.py").write_text("def route():\n    from planted._routing.auto import choose\n")
    (package / "_routing" / "choices.py").write_text("")
    (package / "_routing" / "auto.py").write_text("from planted._routing import choices\ndef choose(): ...\n")
    (package / "_verify.py").write_text("def verify():\n    from planted.integrations.common import flag\n")
    (package / "integrations" / "common.py").write_text("flag = 1\n")
    (package / "integrations" / "gate.py").write_text("from planted._verify import verify\n")
    layers = [
        ["_process"],
        ["backends"],
        ["_routing.choices"],
        ["_routing.auto"],
        ["_routing"],
        ["_verify"],
        ["integrations"],
    ]
    layers.append(["__init__"])
    assert _upward(_graph(package), layers) == [
        "planted._process.preload (layer 0) imports planted.backends (layer 1)",
        "planted._process.preload (layer 0) imports planted.backends.names (layer 1)",
        "planted._routing.auto (layer 3) imports planted._routing (layer 4)",
        "planted._verify (layer 5) imports planted.integrations.common (layer 6)",
    ]


def test_nothing_below_the_hf_facing_class_imports_it():
    below = [module for module, imports in _graph().items() if "tokbackend._tokenizer" in imports]
    assert all(_layer_of(module) >= _layer_of("tokbackend._tokenizer") for module in below), below


def _circle(graph: dict[str, set[str]], root: str) -> str | None:
    """One import circle of `graph`, as "a -> b -> a", or None."""
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> str | None:
        if module in path:
            return " -> ".join((*path[path.index(module) :], module))
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            if imported.startswith(module + ".") or imported == root:
                continue  # a package importing its own modules
            found = visit(imported, (*path, module))
            if found is not None:
                return found
        done.add(module)
        return None

    return next((found for module in sorted(graph) if (found := visit(module, ())) is not None), None)


def test_the_imports_form_no_circle():
    circle = _circle(_graph(), "tokbackend")
    assert circle is None, f"import circle: {circle}"


def test_a_circle_through_an_import_for_type_checking_is_found(tmp_path):
    """Planted: `low` imports `high` for an annotation alone, and `high` imports `low`."""
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("from planted.low import helper\n")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted.high import Thing\ndef helper(): ...\n"
    )
    assert _circle(_graph(package), "planted") in (
        "planted.high -> planted.low -> planted.high",
        "planted.low -> planted.high -> planted.low",
    )
    (package / "low.py").write_text("def helper(): ...\n")
    assert _circle(_graph(package), "planted") is None


def test_only_routing_knows_auto_and_only_backends_name_a_backend():
    concrete = ("gigatoken", "fastokens", "HFBackend", "GigatokenBackend", "FastokensBackend")
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        if module.startswith(("tokbackend.backends", "tokbackend._routing")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value == "auto":
                offenders.append(f"{module}: the literal 'auto'")
            if isinstance(node, ast.Constant) and node.value in concrete[:2]:
                offenders.append(f"{module}: the backend name {node.value!r}")
            if isinstance(node, ast.Name) and node.id in concrete[2:]:
                offenders.append(f"{module}: {node.id}")
    assert not offenders, "\n".join(sorted(offenders))


# The modules that may import the exactness harness (`tokbackend.equivalence`): the gates, inside the
# functions that run them (docs/architecture.md).
GATES = {"tokbackend._verify", "tokbackend._cli", "tokbackend.integrations._sglang_gate"}


def _imports_equivalence(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level) for each import of `tokbackend.equivalence` in `path`."""
    tree = ast.parse(path.read_text())
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [
                f"{node.module}.{alias.name}" if node.module == "tokbackend" else node.module or ""
                for alias in node.names
            ]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.extend(
            (name, id(node) in top_level) for name in names if name.split(".")[:2] == ["tokbackend", "equivalence"]
        )
    return found


def test_only_the_gates_import_the_harness_and_only_where_they_run_it():
    wrong = [
        f"{_module_name(path)} imports {module}" + (" at module level" if top else "")
        for path in sorted(PACKAGE.rglob("*.py"))
        for module, top in _imports_equivalence(path)
        if _module_name(path) not in GATES or top
    ]
    assert not wrong, wrong


def test_a_runtime_import_of_the_harness_is_found(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os\nfrom tokbackend.equivalence.corpus import prompt_text\n\n"
        "def f():\n    import tokbackend.equivalence.grammar\n    from tokbackend import equivalence\n"
    )
    assert _imports_equivalence(planted) == [
        ("tokbackend.equivalence.corpus", True),
        ("tokbackend.equivalence.grammar", False),
        ("tokbackend.equivalence", False),
    ]


# -- mechanisms: where threads and locks are made ---------------------------------------------

# Each a place for bugs to hide: a new one is a decision, made here (docs/architecture.md).
THREAD_SITES = {"_process/threads.py": 1, "_guard/scan.py": 1}
LOCK_SITES = {
    "_state.py": 1,
    "_segments/cache.py": 1,
    "_stats.py": 1,
    "_shared_settings.py": 2,
    "backends/__init__.py": 1,
}
_THREAD_MAKERS = {"Thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "Timer"}
_LOCK_MAKERS = {"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "fork_safe_lock"}


def _sites(package: Path, makers: set[str]) -> dict[str, int]:
    """{module path: calls that make one of `makers`}, read from the source (the factory that
    `fork_safe_lock` is, in _process/forking.py, is not a site: its callers are)."""
    found: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == "_process/forking.py" and "fork_safe_lock" in makers:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if name in makers:
                    found[relative] = found.get(relative, 0) + 1
    return found


def test_threads_and_locks_are_made_only_where_the_table_says():
    assert _sites(PACKAGE, _THREAD_MAKERS) == THREAD_SITES
    # a Condition made around a Lock counts once
    locks = _sites(PACKAGE, _LOCK_MAKERS)
    locks["_shared_settings.py"] -= 1  # threading.Condition(threading.Lock()): one lock
    assert locks == LOCK_SITES
    assert sum(THREAD_SITES.values()) <= 3 and sum(LOCK_SITES.values()) <= 6


def test_a_new_thread_site_is_seen(tmp_path):
    """Planted: a module that starts a thread of its own."""
    import shutil

    copy = tmp_path / "tokbackend"
    shutil.copytree(PACKAGE, copy)
    (copy / "planted.py").write_text("import threading\nthreading.Thread(target=print).start()\n")
    assert _sites(copy, _THREAD_MAKERS) == {**THREAD_SITES, "planted.py": 1}


# -- the public surface: what a user may import, everything else `_`-private ---------------------

# The modules a user, a server or a third-party backend imports by name: the package, the backend
# registry, the server plugins (their entry points, and the app path SGLang's workers start).
PUBLIC = {
    "tokbackend",
    "tokbackend.backends",
    "tokbackend.integrations",
    "tokbackend.integrations.sglang",
    "tokbackend.integrations.sglang_app",
    "tokbackend.integrations.vllm",
}


def _unprefixed(package: Path = PACKAGE) -> set[str]:
    """The modules of `package` whose own name and every package above it lack a leading `_`."""
    names = {_module_name(path, package) for path in package.rglob("*.py")}
    return {name for name in names if not any(part.startswith("_") for part in name.split(".")[1:])}


def test_every_module_outside_the_public_surface_is_private():
    assert _unprefixed() == PUBLIC


def test_a_new_unprefixed_module_is_seen(tmp_path):
    """Planted: a module added to the public surface without a decision."""
    import shutil

    copy = tmp_path / "tokbackend"
    shutil.copytree(PACKAGE, copy)
    (copy / "backends" / "helpers.py").write_text("")
    assert _unprefixed(copy) == PUBLIC | {"tokbackend.backends.helpers"}


def test_each_public_module_names_its_surface_in_all_and_every_name_exists():
    import importlib

    for module in sorted(PUBLIC - {"tokbackend.integrations.sglang_app"}):  # imports SGLang's app
        if module in {"tokbackend.integrations.sglang", "tokbackend.integrations.vllm"}:
            source = (PACKAGE.parent / (module.replace(".", "/") + ".py")).read_text()
            assert "__all__ = [" in source, module
            continue
        imported = importlib.import_module(module)
        names = getattr(imported, "__all__", None)
        assert names is not None, f"{module} has no __all__"
        missing = [name for name in names if not hasattr(imported, name)]
        assert not missing, f"{module}.__all__ names what it lacks: {missing}"
