"""Exhaustive code-point scan: every code point U+0000..U+10FFFF (surrogates excluded), in
several contexts, through a reference and a candidate encoder.

Code points are packed 64 to a string, one per line, so a scan of 1.1 M code points is a few
thousand batch calls per context; a string whose ids differ is re-checked one code point at
a time, in the same context, to name the code points responsible.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable

BatchEncoder = Callable[[list[str]], list[list[int]]]

# Where a code point sits: alone, glued to letters of several scripts, after a digit or a
# space, doubled and tripled (which is where NFC composition and letter/mark runs differ),
# and among combining marks of combining class 230 and 220 (where NFC reorders marks whose
# class one Unicode version knows and another does not).
CONTEXTS = (
    "{0}",
    "a{0}",
    "{0}a",
    " {0}",
    "{0}{0}",
    "1{0}",
    "\u0915{0}",
    "\u4e2d{0}\u6587",
    " {0}{0}{0}x",
    "a\u0300\u0300{0}",
    "a{0}\u0316",
)
_PER_STRING = 64


def all_code_points() -> list[int]:
    return [code_point for code_point in range(0x110000) if not 0xD800 <= code_point <= 0xDFFF]


def ranges(code_points: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted code points merged into inclusive (first, last) ranges."""
    merged: list[tuple[int, int]] = []
    for code_point in sorted(set(code_points)):
        if merged and merged[-1][1] == code_point - 1:
            merged[-1] = (merged[-1][0], code_point)
        else:
            merged.append((code_point, code_point))
    return merged


def format_ranges(code_points: Iterable[int], limit: int = 20) -> str:
    parts = [f"U+{first:04X}" if first == last else f"U+{first:04X}..U+{last:04X}" for first, last in ranges(code_points)]
    shown = ", ".join(parts[:limit])
    return shown + (f", ... ({len(parts) - limit} more ranges)" if len(parts) > limit else "")


@dataclasses.dataclass
class ScanReport:
    """Divergent code points per context, and how long the scan took."""

    divergent: dict[str, list[int]]
    scanned: int
    seconds: float

    @property
    def all_divergent(self) -> list[int]:
        return sorted({code_point for found in self.divergent.values() for code_point in found})

    def summary(self) -> str:
        if not self.all_divergent:
            return f"no divergent code points ({self.scanned} code points x {len(self.divergent)} contexts)"
        lines = [f"{len(self.all_divergent)} divergent code points: {format_ranges(self.all_divergent)}"]
        for context, found in self.divergent.items():
            if found:
                lines.append(f"  context {context.format('X')!r}: {len(found)} ({format_ranges(found, 6)})")
        return "\n".join(lines)


def scan(
    reference: BatchEncoder,
    candidates: dict[str, BatchEncoder],
    code_points: list[int] | None = None,
    contexts: Iterable[str] = CONTEXTS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, ScanReport]:
    """Compare each candidate with `reference` on every code point in every context.

    The reference (usually HuggingFace, the slow side) is run once per context for all candidates.
    """
    started = time.perf_counter()
    code_points = all_code_points() if code_points is None else code_points
    divergent: dict[str, dict[str, list[int]]] = {name: {} for name in candidates}
    groups = [code_points[start : start + _PER_STRING] for start in range(0, len(code_points), _PER_STRING)]
    for context in contexts:
        strings = ["\n".join(context.format(chr(code_point)) for code_point in group) for group in groups]
        expected = reference(strings)
        for name, candidate in candidates.items():
            found: list[int] = []
            for group, left, right in zip(groups, expected, candidate(strings)):
                if left != right:
                    found.extend(_culprits(reference, candidate, group, context))
            divergent[name][context] = found
        if progress is not None:
            progress(context)
    seconds = time.perf_counter() - started
    return {name: ScanReport(found, len(code_points), seconds) for name, found in divergent.items()}


def _culprits(reference: BatchEncoder, candidate: BatchEncoder, group: list[int], context: str) -> list[int]:
    singles = [context.format(chr(code_point)) for code_point in group]
    expected, actual = reference(singles), candidate(singles)
    culprits = [code_point for code_point, left, right in zip(group, expected, actual) if left != right]
    # The difference needs neighbours to show: keep the whole group, so a guard built from
    # this scan errs toward HuggingFace.
    return culprits or list(group)
