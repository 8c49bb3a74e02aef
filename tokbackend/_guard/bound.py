"""The bound on a guard derivation where one is served: how long it may take and how much memory.

The scan checks a `DerivationMeter` between batches, and a derivation past its `DerivationBudget`
stops with `DerivationOverBudget`, writing nothing (`tokbackend guard MODEL --full` derives the
record offline). Time is the lesser of wall-clock and CPU time; memory, the resident set's growth.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable

from tokbackend._errors import TokbackendError
from tokbackend._process import memory

MIB = 1 << 20


class GuardUnavailableError(TokbackendError, RuntimeError):
    """No guard can be had: no record matches the installed versions and deriving one is not
    allowed, was refused, or ran past its bound."""


class DerivationOverBudget(GuardUnavailableError):
    """A derivation stopped by its budget (`what` ran out: "time" or "memory"); it wrote no record."""

    def __init__(self, message: str, what: str) -> None:
        super().__init__(message)
        self.what = what


def resident_bytes() -> int:
    """This process's resident set now (`memory.resident_bytes`; where /proc is not there, its peak)."""
    now = memory.resident_bytes()
    if now is not None:
        return now
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@dataclasses.dataclass(frozen=True)
class DerivationBudget:
    """At most `seconds` (see the module docstring) and `megabytes` (MiB of resident-set growth)
    for one derivation; None: no bound on that.

    >>> DerivationMeter(DerivationBudget(seconds=10.0, megabytes=500), "a test").check("nothing scanned yet")
    """

    seconds: float | None = None
    megabytes: float | None = None
    # whose lesser elapsed time is a derivation's: the wall clock and the process's CPU time (a
    # test passes hand clocks, so that no test waits on a wall-clock window)
    clocks: tuple[Callable[[], float], ...] = (time.monotonic, time.process_time)


UNBOUNDED = DerivationBudget()


class DerivationMeter:
    """How much of its budget the derivation `what` ("the gigatoken guard of NFC + ...") has spent
    since the meter started; `check()` raises past it."""

    def __init__(self, budget: DerivationBudget, what: str) -> None:
        self.budget = budget
        self.what = what
        self._started = tuple(clock() for clock in budget.clocks)
        # the lowest the resident set has been since the start: growth is counted from there
        self._lowest_resident = resident_bytes() if budget.megabytes is not None else 0

    def check(self, progress: str) -> None:
        """Raise `DerivationOverBudget` past the budget; `progress` says how far it got."""
        budget, over = self.budget, None
        spent = min(clock() - started for clock, started in zip(budget.clocks, self._started))
        if budget.seconds is not None and spent > budget.seconds:
            over = "time", f"{spent:.1f} s of its {budget.seconds:g} s, the lesser of wall-clock and CPU time"
        elif budget.megabytes is not None:
            now = resident_bytes()
            self._lowest_resident = min(self._lowest_resident, now)
            if (grown := (now - self._lowest_resident) / MIB) > budget.megabytes:
                over = "memory", f"{grown:.0f} MiB of resident memory of its {budget.megabytes:g} MiB"
        if over is not None:
            raise DerivationOverBudget(
                f"{self.what}: derivation stopped over its bound ({over[1]}) at {progress}; no record written, so this "
                "backend is not exact for this tokenizer here. `tokbackend guard <model> --full` derives the record "
                "offline, with no bound (with `--output DIR`, serve with TOKBACKEND_GUARD_DIR=DIR)",
                over[0],
            )
