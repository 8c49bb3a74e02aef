"""The code-point scan and its bound.

Every code point, in every scan context, goes through a reference and candidate encoders; code
points are packed 64 to a string, and a string whose ids differ is searched for the code points
responsible. Where a derivation is served, the scan checks a `DerivationMeter` between batches, and
a derivation past its `DerivationBudget` stops with `DerivationOverBudget`, writing nothing
(`tokbackend guard MODEL --full` derives the record offline). Time is the lesser of wall-clock and
CPU time; memory, the resident set's growth.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from tokbackend._errors import TokbackendError
from tokbackend._process import memory
from tokbackend._wording import counted
from tokbackend.backends._base import BatchEncoder

MIB = 1 << 20
_PER_STRING = 64
# Code points per batch call; a derivation's budget is checked between two.
BATCH = 512
PLANE = 0x10000


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
    """At most `seconds` (the lesser of wall-clock and CPU time) and `megabytes` (MiB of
    resident-set growth) for one derivation; None: no bound on that.

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


@dataclasses.dataclass(frozen=True)
class ScanContext:
    """A template with `{0}` where the code point goes, and the family it tests."""

    template: str
    family: str

    def format(self, character: str) -> str:
        return self.template.format(character)


def plane_code_points(planes: Iterable[int], stride: int = 1) -> list[int]:
    """Every `stride`-th code point of the given planes, surrogates excluded (they are not valid
    text), in order."""
    return [
        code_point
        for plane in sorted(set(planes))
        for code_point in range(plane * PLANE, (plane + 1) * PLANE, stride)
        if not 0xD800 <= code_point <= 0xDFFF
    ]


def ranges(code_points: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted code points merged into inclusive (first, last) ranges."""
    merged: list[tuple[int, int]] = []
    for code_point in sorted(set(code_points)):
        if merged and merged[-1][1] == code_point - 1:
            merged[-1] = (merged[-1][0], code_point)
        else:
            merged.append((code_point, code_point))
    return merged


def from_ranges(pairs: Iterable[Sequence[int]]) -> frozenset[int]:
    """The inverse of `ranges`."""
    return frozenset(code_point for first, last in pairs for code_point in range(first, last + 1))


def format_ranges(code_points: Iterable[int], limit: int = 20) -> str:
    """'U+0041, U+0300..U+036F, ...' with at most `limit` ranges spelled out."""
    parts = [
        f"U+{first:04X}" if first == last else f"U+{first:04X}..U+{last:04X}" for first, last in ranges(code_points)
    ]
    shown = ", ".join(parts[:limit])
    return shown + (f", ... ({len(parts) - limit} more ranges)" if len(parts) > limit else "")


@dataclasses.dataclass
class ScanReport:
    """Divergent code points per context, and how long the scan took."""

    divergent: dict[ScanContext, list[int]]
    scanned: int
    seconds: float

    @property
    def all_divergent(self) -> list[int]:
        """Every divergent code point, in any context, sorted."""
        return sorted({code_point for found in self.divergent.values() for code_point in found})

    def by_family(self) -> dict[str, list[int]]:
        """Divergent code points per context family ("contractions", "normalizer", ...)."""
        families: dict[str, set[int]] = {}
        for context, found in self.divergent.items():
            if found:
                families.setdefault(context.family, set()).update(found)
        return {family: sorted(found) for family, found in sorted(families.items())}

    def example(self) -> tuple[str, int] | None:
        """One (context template, code point) that diverged, for a minimal counterexample."""
        for context, found in self.divergent.items():
            if found:
                return context.template, found[0]
        return None

    def summary(self) -> str:
        """'3 divergent code points (contractions 3): U+017F, ...', or that there were none."""
        if not self.all_divergent:
            return (
                f"no divergent code points ({counted(self.scanned, 'code point')} x "
                f"{counted(len(self.divergent), 'context')})"
            )
        families = ", ".join(f"{family} {len(found)}" for family, found in self.by_family().items())
        return (
            f"{counted(len(self.all_divergent), 'divergent code point')} ({families}): "
            f"{format_ranges(self.all_divergent, 8)}"
        )


def scan(
    reference: BatchEncoder,
    candidates: dict[str, BatchEncoder],
    contexts: Sequence[ScanContext],
    code_points: Sequence[int],
    progress: Callable[[ScanContext], None] | None = None,
    meter: DerivationMeter | None = None,
) -> dict[str, ScanReport]:
    """Compare each candidate with `reference` on every code point in every context, checking
    `meter` (a derivation's budget) after each batch."""
    started = time.perf_counter()
    divergent: dict[str, dict[ScanContext, list[int]]] = {name: {} for name in candidates}
    groups = [code_points[start : start + _PER_STRING] for start in range(0, len(code_points), _PER_STRING)]
    per_batch = BATCH // _PER_STRING
    # the candidates encode on threads of their own while the reference does (both release the GIL)
    with ThreadPoolExecutor(max_workers=len(candidates) or 1, thread_name_prefix="tokbackend-scan") as threads:
        for index, context in enumerate(contexts):
            found = {name: divergent[name].setdefault(context, []) for name in candidates}
            for start in range(0, len(groups), per_batch):
                batch = groups[start : start + per_batch]
                strings = ["\n".join(context.format(chr(code_point)) for code_point in group) for group in batch]
                answers = {name: threads.submit(candidate, strings) for name, candidate in candidates.items()}
                expected = reference(strings)
                for name, candidate in candidates.items():
                    for group, left, right in zip(batch, expected, answers[name].result()):
                        if left != right:
                            found[name].extend(_culprits(reference, candidate, group, context))
                if meter is not None:
                    meter.check(
                        f"context {index + 1} of {len(contexts)} ({context.template!r}), {len(code_points)} code points"
                    )
            if progress is not None:
                progress(context)
    seconds = time.perf_counter() - started
    return {name: ScanReport(found, len(code_points), seconds) for name, found in divergent.items()}


def _culprits(
    reference: BatchEncoder, candidate: BatchEncoder, group: Sequence[int], context: ScanContext
) -> list[int]:
    """The code points of a differing group that differ on their own: alone in the context, then
    framed by line breaks (where a punctuation run shows a class difference), then by halving."""
    for frame in ("{}", "\n{}\n"):
        singles = [frame.format(context.format(chr(code_point))) for code_point in group]
        expected, actual = reference(singles), candidate(singles)
        culprits = [code_point for code_point, left, right in zip(group, expected, actual) if left != right]
        if culprits:
            return culprits
    if len(group) > 1:
        halves = [group[: len(group) // 2], group[len(group) // 2 :]]
        strings = ["\n" + "\n".join(context.format(chr(code_point)) for code_point in half) + "\n" for half in halves]
        found = [
            code_point
            for half, left, right in zip(halves, reference(strings), candidate(strings))
            if left != right
            for code_point in _culprits(reference, candidate, half, context)
        ]
        if found:
            return found
    # The difference needs these neighbours to show: the whole group errs toward HuggingFace.
    return list(group)
