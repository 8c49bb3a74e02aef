"""What served a bench row: the backend that answered, and whether tokbackend's build was final.

`accelerate()` returns a final build (`stats()["start_up"]["phase"]`); releases before 0.2.0
could return an early one (auto's bridge, a provisional guard) and swap the final one in
seconds later, so a row timed in between measured the bridge. Every row of the benches carries
`backend` and `final` from here:

    ids, row = served.during(tokenizer, lambda: tokenizer(texts)["input_ids"])

`final` is True or False, or "mixed" when the measurement spans the swap. Steady-state rows call
`steady(tokenizer)` first; the rows of the first seconds after `accelerate()` do not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

FIELDS = ("backend", "final")
MIXED = "mixed"


def served_by(stats: dict[str, Any]) -> str:
    """The backend that served, from `tokenizer.tokbackend.stats()`: `"fastokens"`, or
    `"hf (fast path off: REASON)"`. Files from 0.1.0 name it "single" in the routing."""
    routing = stats.get("routing")
    if not routing or not stats.get("fast_path_enabled", True):
        return f"hf (fast path off: {stats.get('disabled_reason')})"
    return routing.get("backend", routing.get("single"))


def row_of(serving: Any) -> dict[str, Any]:
    """`backend` and `final` of what serves: a tokbackend-accelerated tokenizer (read from its
    stats), or the name of a library called directly (nothing swaps under it: final)."""
    if isinstance(serving, str):
        return {"backend": serving, "final": True}
    acceleration = getattr(serving, "tokbackend", None)
    if acceleration is None:
        return {"backend": "hf", "final": True}
    return {"backend": served_by(acceleration.stats()), "final": is_final(acceleration.stats())}


def is_final(stats: dict[str, Any]) -> bool:
    """Whether nothing will replace the build serving (phase "final" or "off"; 0.1.0's stats say
    it as `start_up.final`)."""
    start_up = stats["start_up"]
    return bool(start_up["final"]) if "final" in start_up else start_up["phase"] != "unbuilt"


def spanning(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One row for a measurement made of several (before and after it, or each round): final is
    "mixed" unless all agree, and the backends that served are named in order."""
    rows = list(rows)
    backends = list(dict.fromkeys(row["backend"] for row in rows))
    finals = {row["final"] for row in rows}
    return {"backend": " -> ".join(backends), "final": finals.pop() if len(finals) == 1 else MIXED}


def during(serving: Any, call: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """`call()`'s result and the row of what served it (read before and after: one call reads
    the build once, so only a measurement of several calls can span the swap)."""
    before = row_of(serving)
    result = call()
    return result, spanning([before, row_of(serving)])


def steady(tokenizer: Any, timeout: float = 300.0) -> Any:
    """`tokenizer`, once its final build is swapped in and prepared (its warm-up): what a
    steady-state row measures. A tokenizer without tokbackend is returned as it is."""
    acceleration = getattr(tokenizer, "tokbackend", None)
    wait = getattr(acceleration, "wait_until_prepared", None)  # releases that prepared after accelerate()
    if wait is not None and not wait(timeout):
        raise RuntimeError(f"{acceleration!r}: not final and prepared after {timeout:.0f} s")
    return tokenizer


def missing(extra_info: dict[str, Any]) -> list[str]:
    """The fields of `FIELDS` a row lacks (bench/conftest.py fails a benchmark row that lacks any)."""
    return [field for field in FIELDS if field not in extra_info]


def label(row: dict[str, Any]) -> str:
    """`backend`, and "not final" or "mixed" where the build was not final, for tables."""
    if "backend" not in row:
        return "not recorded"
    final = row.get("final")
    return row["backend"] + ("" if final is True else f" ({'spans the swap' if final == MIXED else 'not final'})")
