"""pytest-benchmark settings for bench/: every round gets prompts no tokenizer has seen, and every
row says what served it (`backend`, `final` in its extra_info; see bench/served.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/ is run as `pytest bench/ --benchmark-only` from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import served  # noqa: E402


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fail a benchmark row that does not name the backend that served it and whether the build
    was final: a row without them cannot say whether it timed the bridge or the final build."""
    result = yield
    benchmark = getattr(item, "funcargs", {}).get("benchmark")
    if benchmark is not None:  # disabled too (--benchmark-disable): the rows are written the same way
        lacking = served.missing(benchmark.extra_info)
        if lacking:
            pytest.fail(
                f"{item.nodeid}: benchmark.extra_info lacks {lacking}; add served.row_of(...) or "
                "served.during(...)'s row (bench/served.py)",
                pytrace=False,
            )
    return result
