"""Regenerates tokbackend/_guard/unicode_history.json (see tokbackend/_guard/contexts.py) in this
checkout, from this interpreter's UCD and each version's `unicodedata2` installed side by side
(`pip install --target DIR/unicodedata2-X unicodedata2==X`), the newest last:

    python tools/unicode_history.py DIR/unicodedata2-15.0.0 ... DIR/unicodedata2-18.0.0
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tokbackend._guard.scan import ranges  # noqa: E402 - after the checkout is on the path

TABLE = Path(__file__).resolve().parent.parent / "tokbackend" / "_guard" / "unicode_history.json"

_HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)  # decomposed by algorithm; some tables list it, others not
# run in a child: the named unicodedata2 installation's tables, or with no argument this interpreter's
_DUMP = """
import json, sys
if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])
    import unicodedata2 as u
else:
    import unicodedata as u
props = [None if 0xD800 <= cp <= 0xDFFF else (u.category(chr(cp)), u.combining(chr(cp)), u.decomposition(chr(cp)))
         for cp in range(0x110000)]
print(json.dumps({"version": u.unidata_version, "props": props}))
"""


def _properties_of(installation: str | None) -> dict[str, Any]:
    command = [sys.executable, "-c", _DUMP, *([installation] if installation is not None else [])]
    properties: dict[str, Any] = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    return properties


def build(installations: list[str]) -> dict[str, Any]:
    """The table from this interpreter's UCD and the `unicodedata2` installations given."""
    tables = [_properties_of(None), *(_properties_of(path) for path in installations)]
    runs: list[list[int]] = []
    previous = None
    for code_point in range(0x110000):
        if tables[0]["props"][code_point] is None:  # a surrogate
            continue
        values = [tuple(table["props"][code_point])[: 2 if code_point in _HANGUL_SYLLABLES else 3] for table in tables]
        if len(set(values)) == 1:
            continue
        key = (tuple(values), len(chr(code_point).encode("utf-8")))
        if key == previous and runs[-1][1] == code_point - 1:  # a run only of neighbours
            runs[-1][1] = code_point
        else:
            runs.append([code_point, code_point])
            previous = key
    newest = tables[-1]["props"]
    whitespace = [
        cp
        for cp in range(0x110000)
        if newest[cp] and (newest[cp][0] in ("Zs", "Zl", "Zp", "Cc", "Cf") or chr(cp).isspace())
    ]
    marks = [cp for cp in range(0x110000) if newest[cp] and newest[cp][1]]
    relatives: dict[str, list[int]] = {letter: [] for letter in "abcdefghijklmnopqrstuvwxyz"}
    for cp in range(0x80, 0x110000):
        if newest[cp] is not None:
            character = chr(cp)
            mapped = (character.lower() + character.upper() + character.casefold()).lower()
            for letter in set(mapped) & relatives.keys():
                relatives[letter].append(cp)
    return {
        "versions": [table["version"] for table in tables],
        "changed_runs": runs,
        "whitespace_like": ranges(whitespace),
        "combining_marks": ranges(marks),
        "case_relatives": relatives,
    }


def main(argv: list[str] | None = None) -> None:
    table = build(list(argv if argv is not None else sys.argv[1:]))
    path = TABLE
    path.write_text(json.dumps(table, separators=(",", ":")), encoding="utf-8")
    changed = sum(last - first + 1 for first, last in table["changed_runs"])
    print(f"Unicode {', '.join(table['versions'])}: {len(table['changed_runs'])} runs, {changed} code points -> {path}")


if __name__ == "__main__":
    main()
