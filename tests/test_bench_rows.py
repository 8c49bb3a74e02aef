"""Every benchmark row says what served it: bench/conftest.py fails a pytest-benchmark row whose
extra_info lacks `backend` or `final` (bench/served.py), so a table cannot pass off the bridge
routing of the first seconds after `accelerate()` as the final build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLANTED = """
def test_says_what_served_it(benchmark):
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update(backend="fastokens", final=True)


def test_says_only_the_backend(benchmark):
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update(backend="gigatoken")


def test_without_a_benchmark():
    pass
"""


def test_a_benchmark_row_without_what_served_it_fails(tmp_path):
    (tmp_path / "test_planted.py").write_text(PLANTED)
    # not this run's pytest settings (an xdist worker's turn pytest-benchmark off in the child)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "bench.conftest",
            "-o",
            "addopts=",
            "-rA",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    assert "PASSED test_planted.py::test_says_what_served_it" in output, output
    assert "PASSED test_planted.py::test_without_a_benchmark" in output, output
    assert "FAILED test_planted.py::test_says_only_the_backend" in output, output
    assert "lacks ['final']" in output, output
