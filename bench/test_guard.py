"""The Unicode guard's per-call cost, next to the encode it guards (same text, same run).

Group "guard check 100k chars": `guard.needs_hf(text)` on 100k characters of ASCII code and of
mixed multilingual text, and the raw backend encoding the same mixed text as the reference the
ratio is taken against. Every round gets new text.
"""

from __future__ import annotations

import pytest

from bench import served, workloads
from tokbackend.equivalence.corpus import prompt_text

_seed = iter(range(10_000_000, 20_000_000))


def _text(kind: str) -> str:
    text = prompt_text(next(_seed), 100_000, "code" if kind == "ascii" else "mixed")
    return text.encode("ascii", "ignore").decode() if kind == "ascii" else text


@pytest.mark.parametrize("competitor", ["guard check, ASCII", "guard check, mixed", "raw backend encode, mixed"])
def test_guard_check_cost(benchmark, competitor):
    benchmark.group = "guard check 100k chars"
    benchmark.extra_info.update(competitor=competitor, workload=benchmark.group)
    accelerated = workloads.accelerated()
    acceleration = accelerated.tokbackend
    if competitor.startswith("raw"):
        call, kind = acceleration.backend.encode, "mixed"
    else:
        call, kind = acceleration.guard.needs_hf, "ascii" if "ASCII" in competitor else "mixed"
    _, row = served.during(accelerated, lambda: benchmark.pedantic(call, setup=lambda: ((_text(kind),), {}), rounds=30))
    benchmark.extra_info.update(row)
