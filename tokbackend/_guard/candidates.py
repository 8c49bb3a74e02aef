"""The code points a fast derivation scans: where two engines' Unicode tables or rules can differ.

`candidate_runs` gives runs of code points each engine reads alike: those whose properties changed
between Unicode versions (14.0 to the newest), and single code points where the pipeline's rules can
differ (case relatives, whitespace and format characters, combining marks). `sample` is the safety
net over the rest; a divergence there widens the scan to the run around it (`run_around`).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from typing import Any

from tokbackend._guard.contexts import composes, split_patterns
from tokbackend._guard.scan import from_ranges
from tokbackend._package_data import read_text
from tokbackend._tokenizer_json import top_level_sections

_CASE_INSENSITIVE = re.compile(r"\(\?i:([^)]*)\)")
# Every this many code points of the rest is scanned in the screen contexts: of the planes that
# hold assigned characters, and of the planes whose properties the stability policy fixes.
SAMPLE_STRIDE = 61
FIXED_PLANES_STRIDE = 4099


@functools.cache
def history() -> dict[str, Any]:
    """The shipped table `unicode_history.json` (`tools/unicode_history.py` regenerates it)."""
    table: dict[str, Any] = json.loads(read_text("tokbackend._guard", "unicode_history.json"))
    return table


def changed_runs() -> list[tuple[int, int]]:
    """Runs (first, last) of code points whose properties changed between the versions."""
    return [tuple(run) for run in history()["changed_runs"]]


def rule_sensitive(name: str) -> list[int]:
    """Code points where engines' rules can differ: "whitespace_like", "combining_marks", or
    "case_relatives:<letter>" (code points whose case mappings or folding involve <letter>)."""
    table = history()
    if name.startswith("case_relatives:"):
        relatives: dict[str, list[int]] = table["case_relatives"]
        return relatives.get(name.partition(":")[2], [])
    return [code_point for first, last in table[name] for code_point in range(first, last + 1)]


def candidate_runs(tokenizer_json: str | dict[str, Any]) -> list[tuple[int, int]]:
    """Runs of code points to scan in every context (see the module docstring)."""
    spec = (
        top_level_sections(tokenizer_json) if isinstance(tokenizer_json, str) else tokenizer_json
    )  # vocabulary unparsed
    runs = list(changed_runs())
    singles: set[int] = set(rule_sensitive("whitespace_like"))
    groups = [group for pattern in split_patterns(spec) for group in _CASE_INSENSITIVE.findall(pattern)]
    # the ASCII letters the pattern matches case-insensitively
    letters = {
        character.lower() for group in groups for character in group if character.isalpha() and character.isascii()
    }
    for letter in sorted(letters):
        singles.update(rule_sensitive(f"case_relatives:{letter}"))
    if composes(spec):
        singles.update(rule_sensitive("combining_marks"))
    runs += [(code_point, code_point) for code_point in sorted(singles - from_ranges(runs))]
    return sorted(runs)


def representatives(run: tuple[int, int]) -> tuple[int, ...]:
    """The first, middle and last code point of a run (fewer for a run that short)."""
    first, last = run
    return tuple(sorted({first, (first + last) // 2, last}))


def sample(planes: tuple[int, ...], runs: list[tuple[int, int]], stride: int = SAMPLE_STRIDE) -> list[int]:
    """Every `stride`-th code point of `planes` outside `runs` (surrogates left out)."""
    covered = from_ranges(runs)
    return [
        code_point
        for plane in planes
        for code_point in range(plane << 16, (plane + 1) << 16, stride)
        if code_point not in covered and not 0xD800 <= code_point <= 0xDFFF
    ]


def run_around(code_point: int, limit: int = 4096) -> tuple[int, int]:
    """The code points around `code_point` (at most `limit` each side) of its category,
    combining class and decomposition type."""

    def kind(point: int) -> tuple[str, int, str] | None:
        if 0xD800 <= point <= 0xDFFF or not 0 <= point < 0x110000:
            return None
        character = chr(point)
        return (
            unicodedata.category(character),
            unicodedata.combining(character),
            unicodedata.decomposition(character)[:1],
        )

    own = kind(code_point)
    first = code_point
    while first > code_point - limit and kind(first - 1) == own:
        first -= 1
    last = code_point
    while last < code_point + limit and kind(last + 1) == own:
        last += 1
    return first, last
