"""The docs cannot go stale: every command in README.md, docs/*.md and CONTRIBUTING.md is run by a
test here or by a step of `.ci/run`, every Python example runs as written, and what the docs
repeat from the code (verify's exit codes and steps, the version, the extras) is checked against
the code.

A command is a line of a ```bash block (a `\\` continues it; `# ...` comments are dropped), split
at ` && `. Each must be one of:
- RUN_HERE: run as written, here, by `test_the_commands_run_here_run_as_written`;
- PARSED_HERE: too slow to run here (minutes, a quiet machine); run here with a suffix that makes
  it only parse its arguments (`--help`, `--collect-only`);
- a line of `.ci/run`, verbatim;
- ELSEWHERE: mapped to the test that runs it or parses exactly its arguments (servers that need a
  GPU, the full verify), or to the line of `.ci/run` that runs it (installs).
A command in none of them fails `test_every_command_is_run_by_a_test_or_by_ci`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import tokbackend
from tokbackend import _verify as verify

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
CI = ROOT / ".ci" / "run"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
LANGUAGES = {"bash", "python", "text"}  # text: output and synopses, which are not commands

# Run as written (cwd: a fresh temporary directory), each with what it must leave behind.
RUN_HERE = {
    "tokbackend --version": f"tokbackend {tokbackend.__version__}",
    "tokbackend verify --help": "exit codes:",
    "tokbackend guard --help": "--output",
    "rm -f ~/.cache/tokbackend/auto/choices.json": None,  # run with HOME in the temporary directory
    # docs/guard-records.md's two lines run as one script, then a process serving from the record
    "tokbackend guard qwen3.6 --output ./tokbackend-guards": None,
    "export TOKBACKEND_GUARD_DIR=$PWD/tokbackend-guards": None,
    # docs/guard-records.md's cache filled at image build time, run as one script, then a process serving from it
    "export TOKBACKEND_CACHE_DIR=$PWD/tokbackend-cache": None,
    "tokbackend guard qwen3.6": None,
    "python -c \"import tokbackend; tokbackend.load('qwen3.6')\"": None,
}
# Run with a suffix that only parses them: the benchmarks and the thorough profile.
PARSED_HERE = {
    "pytest bench/ --benchmark-only --benchmark-json=bench/results.json": "--help",
    "python bench/report.py bench/results.json": "--help",
    "python bench/backends.py agents": "--help",
    "python bench/backends.py agents --quick": "--help",
    "python bench/backends.py cache-cost --prompts 240": "--help",
    "python bench/boot.py": "--help",
    "python bench/overhead.py": "--help",
    "python bench/guard_derivation.py fast": "--help",
    "python bench/one_text.py": "--help",
    "python bench/guard_derivation.py bound": "--help",
}
# Run elsewhere: "tests/FILE::TEST" (the test that runs it, or parses exactly its arguments) or
# ".ci/run: LINE" (the step that runs it).
ELSEWHERE = {
    ".ci/run": ".ci/run: set -euo pipefail",  # the CI itself
    "pip install '.[test]'": '.ci/run: python -m pip install -q "$TOKBACKEND_WHEEL[test]"',
    "pip install tokbackend": '.ci/run: python -m pip install -q "$TOKBACKEND_WHEEL"',  # the plain install
    "bash .ci/tests -m slow": ".ci/run: bash .ci/tests",  # the same script, the thorough marker
    "tokbackend verify qwen3.6": "tests/test_verify.py::test_full_verify_on_qwen36_with_scan_and_grammar_gate",
    "version=0.5.23": ".ci/run: for version in 0.5.13 0.5.23; do",
    "venv=.venv-sglang": '.ci/run: local version="$1" venv="$venvs/sglang-$1"',  # .ci/run's venvs are outside the tree
    "version=0.34.0": ".ci/run: for version in 0.33.0 0.34.0; do",
    "venv=.venv-vllm": '.ci/run: local version="$1" venv="$venvs/vllm-$1"',
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tokenizer-backend gigatoken": (
        "tests/sglang/test_sglang_plugin.py::test_the_stock_cli_parses_the_flag"
    ),
    "vllm serve Qwen/Qwen3-8B --tokenizer-mode gigatoken": (
        "tests/vllm/test_vllm_plugin.py::test_the_cli_parses_the_mode"
    ),
    "tokbackend sglang-gate --model-path /models/qwen3 --flag gigatoken -- --tp 1 "
    "--constrained-json-disable-any-whitespace": (
        "tests/test_serving_gate.py::test_the_gate_finds_a_backend_that_drops_an_id_on_long_texts"
    ),
    "tokbackend sglang-gate --model-path /models/qwen3 --reference-url http://stock:30000 --candidate-url "
    "http://ours:30001": ("tests/test_serving_gate.py::test_the_gate_finds_a_backend_that_drops_an_id_on_long_texts"),
}
CHANGELOG_SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def fenced_blocks() -> list[tuple[str, str, str]]:
    """(where, language, text) of every fenced block in the docs; where is 'FILE:LINE'."""
    found = []
    for path in DOCS:
        source = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(source):
            line = source.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1).strip(), match.group(2)))
    return found


def documented_commands(blocks: list[tuple[str, str, str]] | None = None) -> list[tuple[str, str]]:
    """(where, command) for every command in the docs' bash blocks."""
    commands = []
    for where, language, text in fenced_blocks() if blocks is None else blocks:
        if language != "bash":
            continue
        for line in text.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s+)#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.extend((where, _words(part)) for part in line.split(" && "))
    return commands


def _words(command: str) -> str:
    return " ".join(command.split())


def ci_lines() -> set[str]:
    """The commands of `.ci/run`, continuations joined, each part of an `a && b` on its own."""
    text = CI.read_text(encoding="utf-8").replace("\\\n", " ")
    return {_words(part) for line in text.splitlines() for part in line.split(" && ") if line.strip()}


def uncovered(commands: list[tuple[str, str]]) -> list[str]:
    known = set(RUN_HERE) | set(PARSED_HERE) | set(ELSEWHERE) | ci_lines()
    return [f"{where}: {command}" for where, command in commands if command not in known]


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`script` in bash, with this interpreter's scripts (`tokbackend`, `pytest`) first on PATH."""
    # not this run's pytest settings: an xdist worker's PYTEST_XDIST_WORKER turns a child's
    # pytest-benchmark off (and --benchmark-only then refuses to start)
    environment = {key: value for key, value in {**os.environ, **env}.items() if not key.startswith("PYTEST_")}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{script}"],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


# -- every command is run somewhere ------------------------------------------------------------


def test_every_fenced_block_says_its_language():
    """A command in an unlabelled or ```sh block would escape the checks below."""
    strange = [f"{where}: ```{language}" for where, language, _ in fenced_blocks() if language not in LANGUAGES]
    assert not strange, f"fenced blocks must be one of {sorted(LANGUAGES)}: {strange}"


def test_every_command_is_run_by_a_test_or_by_ci():
    missing = uncovered(documented_commands())
    assert not missing, (
        "commands in the docs that nothing runs (run them in tests/test_docs.py, or map them in its "
        f"ELSEWHERE to the test or .ci/run line that runs them): {missing}"
    )


def test_a_command_nothing_runs_fails_the_check():
    """The check above, on a planted block: a command nobody runs is named."""
    planted = [("planted.md:1", "bash", "tokbackend verify qwen3.6 --quick\ntokbackend --version  # runs here\n")]
    assert uncovered(documented_commands(planted)) == ["planted.md:1: tokbackend verify qwen3.6 --quick"]


def test_the_mappings_name_what_exists():
    """Every command the mappings name is still in the docs, and what ELSEWHERE points at exists."""
    documented = {command for _, command in documented_commands()}
    stale = sorted((set(RUN_HERE) | set(PARSED_HERE) | set(ELSEWHERE)) - documented)
    assert not stale, f"no longer in the docs, drop them from tests/test_docs.py: {stale}"
    lines = ci_lines()
    for command, target in ELSEWHERE.items():
        if target.startswith(".ci/run: "):
            assert target.removeprefix(".ci/run: ") in lines, f"{command!r}: .ci/run has no line {target!r}"
            continue
        path, name = target.split("::")
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), f"{command!r}: no test {target}"
        if not command.startswith("tokbackend "):  # tokbackend's own are parsed below
            options = [word for word in shlex.split(command) if word.startswith("--")]
            assert all(option in source for option in options), f"{target} does not pass {options}"


def test_tokbackend_commands_run_elsewhere_parse():
    """The heavy tokbackend commands (a full verify, the live gate) parse with today's CLI."""
    from tokbackend._cli import build_parser

    for command in ELSEWHERE:
        if command.startswith("tokbackend "):
            build_parser().parse_args(shlex.split(command)[1:])


def test_the_readme_test_command_is_the_one_ci_runs():
    lines = CI.read_text(encoding="utf-8").splitlines()
    comment = "# The README's test command (keep the two in step):"
    marker = next(index for index, line in enumerate(lines) if line.strip() == comment)
    ci_command = lines[marker + 1].strip()
    readme = [command for where, command in documented_commands() if where.startswith("README.md")]
    assert ci_command in readme, f"the README's test command is not .ci/run's {ci_command!r}"


@pytest.mark.parametrize("command", sorted(PARSED_HERE))
def test_the_slow_commands_parse(command, tmp_path):
    completed = bash(f"cd {shlex.quote(str(ROOT))}\n{command} {PARSED_HERE[command]}", tmp_path)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]


@pytest.mark.parametrize("command", ["tokbackend --version", "tokbackend verify --help", "tokbackend guard --help"])
def test_the_commands_run_here_run_as_written(command, tmp_path):
    completed = bash(command, tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert RUN_HERE[command] in completed.stdout


def test_resetting_autos_choices_removes_the_file_auto_reads(tmp_path, monkeypatch):
    from tokbackend._routing import choices

    monkeypatch.delenv("TOKBACKEND_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    choices.remember("some-model", "gigatoken")
    assert choices.remembered("some-model") == "gigatoken"
    completed = bash("rm -f ~/.cache/tokbackend/auto/choices.json", tmp_path, HOME=str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    assert choices.remembered("some-model") is None


@pytest.mark.slow  # three processes load Qwen3.6
def test_a_baked_record_is_found_where_the_docs_say(tmp_path):
    """docs/guard-records.md: bake the records, point TOKBACKEND_GUARD_DIR at them, serve."""
    [where] = {
        where for where, command in documented_commands() if command.startswith("tokbackend guard qwen3.6 --output")
    }
    block = next(text for at, language, text in fenced_blocks() if at == where)
    serve = "import tokbackend; print(tokbackend.load('qwen3.6', 'gigatoken').tokbackend.stats()['guard_record'])"
    completed = bash(f"{block}\npython -c {shlex.quote(serve)}", tmp_path)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert completed.stdout.strip().splitlines()[-1].startswith(str(tmp_path / "tokbackend-guards"))


@pytest.mark.slow  # three processes load Qwen3.6, one derives twice: 100 s on 2 cores shared with other work
def test_a_cache_filled_at_image_build_time_serves_without_writing_to_it(tmp_path):
    """docs/guard-records.md: fill a cache directory at image build time, then serve from it (read
    only): nothing is derived, nothing in it is written, no WARNING about it."""
    [where] = {where for where, command in documented_commands() if command == "tokbackend guard qwen3.6"}
    block = next(text for at, language, text in fenced_blocks() if at == where)
    filled = bash(block, tmp_path)
    assert filled.returncode == 0, filled.stdout[-2000:] + filled.stderr[-2000:]
    cache = tmp_path / "tokbackend-cache"
    kept = {path: path.stat().st_mtime_ns for path in cache.rglob("*")}
    assert (
        any(cache.glob("guards/*.json"))
        and (cache / "auto" / "choices.json").is_file()
        and any(cache.glob("qwen3.6-*"))
    )
    serve = "import tokbackend; print(tokbackend.load('qwen3.6').tokbackend.describe())"
    served = bash(f"python -c {shlex.quote(serve)}", tmp_path, TOKBACKEND_CACHE_DIR=str(cache))
    assert served.returncode == 0, served.stderr[-2000:]
    assert "auto's choice" in served.stdout, served.stdout  # read from the cache, not chosen afresh
    assert "cannot write" not in served.stderr and "deriving" not in served.stderr, served.stderr[-2000:]
    assert {path: path.stat().st_mtime_ns for path in cache.rglob("*")} == kept


# -- every Python example runs as written --------------------------------------------------------


@pytest.mark.parametrize("where", [where for where, language, _ in fenced_blocks() if language == "python"])
def test_every_python_example_runs_as_written(where):
    text = next(text for at, language, text in fenced_blocks() if at == where)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(text, where, "exec"), {"__name__": "__docs__"})


# -- what the docs repeat from the code ----------------------------------------------------------


def _section(path: Path, heading: str) -> str:
    source = path.read_text(encoding="utf-8")
    start = source.index(f"\n{heading}\n")
    end = source.find("\n## ", start + 1)
    return source[start : end if end != -1 else None]


def test_the_readmes_lane_table_is_the_committed_measurement():
    """README's table of the lanes is `table()` of bench/options.json, word for word, so a cell
    cannot say what was not measured (`python bench/options.py readme` writes it)."""
    spec = importlib.util.spec_from_file_location("bench_options", ROOT / "bench" / "options.py")
    assert spec is not None and spec.loader is not None
    options = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(options)  # the tree's bench/, not on sys.path: it imports only the standard library
    results = json.loads((ROOT / "bench" / "options.json").read_text(encoding="utf-8"))
    assert options.readme_table(ROOT / "README.md") == options.table(results), "run: python bench/options.py readme"


# a measured figure: a count of tests, a duration, a size (a core count names a machine, not a figure)
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?[\s-]?(?:tests|minutes|min|seconds|s|ms|GB|MB|MiB)\b")


def shared_figures(first: str, second: str) -> set[str]:
    """The figures both texts state (whitespace normalized): each should have one home that the other links to."""
    return {" ".join(f.split()) for f in FIGURE.findall(first)} & {" ".join(f.split()) for f in FIGURE.findall(second)}


def test_readme_and_contributing_share_no_figure():
    """A figure both files state goes stale in one of them: the CI profile's test count and time
    live in CONTRIBUTING.md ("Test profiles"), and the README links there."""
    readme, contributing = ((ROOT / name).read_text(encoding="utf-8") for name in ("README.md", "CONTRIBUTING.md"))
    assert shared_figures(readme, contributing) == set(), "state it in one file and link to it from the other"
    assert "CONTRIBUTING.md#test-profiles" in readme and "Test profiles" in _headings(ROOT / "CONTRIBUTING.md")


def test_a_figure_stated_twice_is_named():
    """Planted: the README repeating CONTRIBUTING's test count and time, as it once did."""
    contributing = "that was 596\ntests in 26.3 minutes"
    readme = "its 596 tests took 26.3 minutes on 2 cores (16 cores: less)"
    assert shared_figures(readme, contributing) == {"596 tests", "26.3 minutes"}


def test_the_exit_code_table_is_verifys():
    """docs/verify.md's table is `verify.EXIT_CODES` word for word, every EXIT_ constant has a row,
    and the order of precedence is the code's."""
    section = _section(ROOT / "docs" / "verify.md", "## Exit codes")
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", section, re.MULTILINE))
    assert {int(code): meaning for code, meaning in rows.items()} == verify.EXIT_CODES
    constants = {value for name, value in vars(verify).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert constants == set(verify.EXIT_CODES)
    order = ", ".join(str(code) for code in verify.EXIT_PRECEDENCE)
    assert f"it exits with the first of {order} that applies." in " ".join(section.split())


def test_the_synopsis_is_verifys_usage(monkeypatch):
    """docs/verify.md's synopsis is what `tokbackend verify --help` prints first (100 columns)."""
    from tokbackend._cli import build_parser, subcommand_parser

    monkeypatch.setenv("COLUMNS", "100")
    usage = subcommand_parser(build_parser(), "verify").format_usage()
    synopsis = next(
        text for where, language, text in fenced_blocks() if where.startswith("docs/verify.md") and language == "text"
    )
    assert synopsis == usage, f"docs/verify.md's synopsis, to paste:\n{usage}"


def test_the_sample_output_shows_every_step_verify_runs():
    steps = ["load", "boot probe", *verify.STEP_TITLES.values()]
    sample = next(
        text
        for where, language, text in fenced_blocks()
        if where.startswith("docs/verify.md") and text.startswith("step ")
    )
    shown = [line.split("  ")[0] for line in sample.splitlines()[1:] if not line.startswith("result:")]
    assert shown == steps


def test_the_changelogs_newest_release_is_the_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.MULTILINE)
    assert releases[0] == ("Unreleased", "")
    assert releases[1][0] == tokbackend.__version__ and releases[1][1], releases[1]
    for index, (name, _) in enumerate(releases):
        body = re.split(r"^## \[", changelog, flags=re.MULTILINE)[index + 1]
        sections = re.findall(r"^### (.+)$", body, re.MULTILINE)
        assert len(sections) == len(set(sections)), f"[{name}] repeats a section: {sections}"
        assert set(sections) <= set(CHANGELOG_SECTIONS), sections
        assert re.search(rf"^\[{re.escape(name)}\]: https://", changelog, re.MULTILINE), f"no link for [{name}]"


def test_the_version_is_written_once():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert 'dynamic = ["version"]' in project and not re.search(r"^version\s*=", project, re.MULTILINE)
    assert 'version = {attr = "tokbackend._version.VERSION"}' in pyproject


def test_every_extra_the_docs_name_exists():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extras = set(
        re.findall(r"^(\w+) = \[", pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0], re.M)
    )
    named = set()
    for path in DOCS:
        for group in re.findall(r"(?:tokbackend|\.)\[([\w,]+)\]", path.read_text(encoding="utf-8")):
            named.update(group.split(","))
    assert named and named <= extras, f"extras the docs name that pyproject.toml lacks: {sorted(named - extras)}"


# -- cross-references resolve -----------------------------------------------------------------

# Where the package, the tests, the benches and CI point a reader at a file or a section.
REFERRING = [
    *DOCS,
    ROOT / "pyproject.toml",
    *sorted(ROOT.glob(".ci/*")),
    *(
        path
        for folder in ("tokbackend", "equivalence", "bench", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
    ),
]
REFERRING.remove(Path(__file__).resolve())  # its patterns and planted references are no references
# `README "Heading"`, `README "A", "B"`, `docs/x.md, "Heading"` (also after a markdown link to it,
# and wrapped onto the next line of a comment or docstring)
SECTION_REFERENCE = re.compile(
    r'(README|CONTRIBUTING|docs/[a-z-]+)(?:\.md)?(?:\]\([^)]*\))?,?\s+(?:#\s+)?((?:"[^"\n]+"(?:,\s+(?:#\s+)?)?)+)'
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _headings(path: Path) -> set[str]:
    return {match.strip() for match in re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_references(paths: list[Path]) -> list[str]:
    """'FILE: what it points at' for every section reference to a heading its file lacks, link to
    a local file that does not exist, or anchor no heading makes."""
    broken = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for match in SECTION_REFERENCE.finditer(text):
            target = ROOT / (match.group(1) + ".md")
            for heading in re.findall(r'"([^"]+)"', match.group(2)):
                if not target.is_file() or heading not in _headings(target):
                    broken.append(f"{where}: {match.group(1)} {heading!r}")
        if path.suffix != ".md":
            continue
        for link in MARKDOWN_LINK.findall(text):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = link.partition("#")
            target = (path.parent / file).resolve() if file else path
            if not target.exists():
                broken.append(f"{where}: link to {link}")
            elif anchor and target.suffix == ".md" and anchor not in {_slug(heading) for heading in _headings(target)}:
                broken.append(f"{where}: anchor {link}")
    return broken


def test_every_cross_reference_resolves():
    assert broken_references(REFERRING) == []


def test_a_reference_to_a_section_that_is_gone_is_named(tmp_path):
    """Planted: the references that had gone stale (README sections moved into docs/)."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        '# see README "Segment cache"; docs/verify.md, "Exit codes"; docs/sglang.md, "No such heading"\n'
    )
    doc = tmp_path / "planted.md"
    doc.write_text("[here](docs/missing.md) and [there](" + str(ROOT / "docs" / "verify.md") + "#no-such-anchor)\n")
    assert broken_references([planted, doc]) == [
        f"{planted}: README 'Segment cache'",
        f"{planted}: docs/sglang 'No such heading'",
        f"{doc}: link to docs/missing.md",
        f"{doc}: anchor {ROOT / 'docs' / 'verify.md'}#no-such-anchor",
    ]
