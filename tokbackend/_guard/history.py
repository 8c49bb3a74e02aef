"""Which code points' Unicode properties differ between the Unicode versions engines ship.

Engines read a code point differently only where their tables differ (the UCD changed or newly
assigned it) or their rules do (case folding, `\\s`). `unicode_history.json` lists the first as
runs each engine reads alike (one property history and UTF-8 length, Unicode 14.0, the oldest any
engine here uses, to the newest) and the second as case relatives of the ASCII letters, whitespace
and format characters, and combining marks; `tools/unicode_history.py` regenerates it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from tokbackend._package_data import read_text


@functools.cache
def history() -> dict[str, Any]:
    """The shipped table (see the module docstring)."""
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
