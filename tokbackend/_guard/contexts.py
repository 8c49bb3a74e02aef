"""What a guard derivation scans: contexts drawn from a tokenizer's pipeline, and code points.

A code point makes two engines disagree only next to a neighbour of another class, so each is put
on both sides of every class and literal the split regex distinguishes, contractions, digit runs,
whitespace and, for a composing normalizer, combining marks (`derive_contexts`; each context keeps
its family).

The fast derivation scans, in every context, `candidate_runs`: runs of code points each engine
reads alike, those whose properties changed between Unicode versions (14.0 to the newest), and
single code points where the pipeline's rules can differ (case relatives, whitespace and format
characters, combining marks). `sample` is the safety net over the rest; a divergence there widens
the scan to the run around it (`run_around`).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

from tokbackend._guard.scan import ScanContext, from_ranges, plane_code_points
from tokbackend._package_data import read_text
from tokbackend._tokenizer_json import top_level_sections

# Neighbours by class: (left, right) pairs are built from these.
LETTERS = MappingProxyType({"Ll": "a", "Lu": "A", "Lt": "\u01c5", "Lm": "\u02b0", "Lo": "\u4e2d"})
MARKS = MappingProxyType({"Mn": "\u0301", "Mc": "\u093e"})
PUNCTUATION = (":", ".", "!", '"', "(", "$")
SPACES = (" ", "  ", "\t", "\n", "\r\n", "\u3000")
_CONTRACTION = re.compile(r"'([A-Za-z]{1,3})(?=[|)])")
_CASE_CLASSES = re.compile(r"\\p\{(Lu|Ll|Lt|Lm|Lo)\}")
_DIGIT_GROUP = re.compile(r"\\p\{N\}\{1,(\d)\}")
_COMPOSING = frozenset({"NFC", "NFKC", "NFD", "NFKD"})
_CASE_INSENSITIVE = re.compile(r"\(\?i:([^)]*)\)")
# Every this many code points of the rest is scanned in the screen contexts: of the planes that
# hold assigned characters, and of the planes whose properties the stability policy fixes.
SAMPLE_STRIDE = 61
FIXED_PLANES_STRIDE = 4099


def pipeline_steps(tokenizer_json: dict[str, Any], section: str) -> Iterator[dict[str, Any]]:
    """The steps of a tokenizer.json's "pre_tokenizer" or "normalizer", inside Sequences too."""
    children = "pretokenizers" if section == "pre_tokenizer" else "normalizers"

    def visit(node: object) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            yield node
            for child in node.get(children) or []:
                yield from visit(child)

    return visit(tokenizer_json.get(section))


def split_patterns(tokenizer_json: dict[str, Any]) -> list[str]:
    """The Split regexes of a tokenizer.json's pre-tokenizer (inside Sequences too)."""
    return [
        step["pattern"]["Regex"]
        for step in pipeline_steps(tokenizer_json, "pre_tokenizer")
        if step.get("type") == "Split" and isinstance(step.get("pattern"), dict) and "Regex" in step["pattern"]
    ]


def composes(tokenizer_json: dict[str, Any]) -> bool:
    """Whether the normalizer composes or decomposes (NFC, NFKC, NFD, NFKD; inside Sequences too)."""
    return any(step.get("type") in _COMPOSING for step in pipeline_steps(tokenizer_json, "normalizer"))


def _pairs(family: str, lefts: list[str], rights: list[str]) -> list[ScanContext]:
    """Each left neighbour and each right neighbour used at least once, paired up."""
    count = max(len(lefts), len(rights))
    return [
        ScanContext(lefts[index % len(lefts)] + "{0}" + rights[(index + 1) % len(rights)], family)
        for index in range(count)
    ]


def _family(family: str, *templates: str) -> list[ScanContext]:
    return [ScanContext(template, family) for template in templates]


def derive_contexts(tokenizer_json: str) -> list[ScanContext]:
    """The scan contexts for one tokenizer (see the module docstring for why they cover it)."""
    spec = top_level_sections(tokenizer_json)  # its vocabulary unparsed
    pattern = "|".join(split_patterns(spec))
    contexts = [ScanContext("{0}", "alone")]

    case_classes = sorted(set(_CASE_CLASSES.findall(pattern))) or ["Ll", "Lo"]
    letters = [LETTERS[name] for name in case_classes if name in LETTERS] or ["a"]
    letters = sorted(set(letters) | {"a", "A", "\u4e2d"})
    contexts += _pairs("letters", letters, letters[::-1])
    contexts += _family("letters", "a{0}b", "A{0}a", "a{0}A")
    contexts += _pairs("marks", ["a" + MARKS["Mn"], "\u0915" + MARKS["Mc"]], list(MARKS.values()))

    suffixes = sorted(set(_CONTRACTION.findall(pattern))) or ["s", "t", "re", "ve", "m", "ll", "d"]
    contexts += _family(
        "contractions", *("{0}'" + suffix for suffix in suffixes), "a{0}'" + suffixes[0], " {0}'" + suffixes[-1]
    )
    # The code point in place of each letter of each alternative: case folding ('ſ' ~ 's').
    folded = {"'" + suffix[:index] + "{0}" + suffix[index + 1 :] for suffix in suffixes for index in range(len(suffix))}
    contexts += _family("case_folding", *sorted(folded))

    # Characters the pattern names literally (quantifiers and class syntax are not among them).
    literals = sorted(
        {character for character in re.sub(r"\\[pP]\{\w+\}|\\.", "", pattern) if character in "/'@#%&=<>~`_"}
    )
    punctuation = list(PUNCTUATION) + [literal for literal in literals if literal not in PUNCTUATION]
    contexts += _pairs("punctuation", punctuation, punctuation[::-1])
    contexts += _family("punctuation", "{0}:A", " {0}!!", "a.{0}.")

    group = _DIGIT_GROUP.search(pattern)
    run = "1" * (int(group.group(1)) + 1 if group else 4)
    contexts += _family("digits", "1{0}2", run + "{0}" + run, "12{0}a", "a{0}123", "\u0661{0}\u00b2")

    contexts += _pairs("whitespace", list(SPACES), list(SPACES[::-1]))
    contexts += _family("whitespace", "a  {0}", "{0}  a", "a {0} a", "{0}\n\n")

    if composes(spec):
        # repeats; marks of combining class 1 (U+0334), 240 (U+0345), 230 (U+0300), 220 (U+0316)
        contexts += _family(
            "normalizer", "{0}{0}", " {0}{0}{0}x", "e{0}\u0334", "a\u0345{0}", "a\u0300\u0300{0}", "a{0}\u0316"
        )
        contexts += _family(
            "normalizer", "\u1100{0}\u11a8", "\uac00{0}\u1161", "\u0915{0}\u093c"
        )  # Hangul jamo, a nukta
    unique: dict[str, ScanContext] = {}
    for context in contexts:
        unique.setdefault(context.template, context)
    return list(unique.values())


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


def candidate_runs(tokenizer_json: str) -> list[tuple[int, int]]:
    """Runs of code points to scan in every context (see the module docstring)."""
    spec = top_level_sections(tokenizer_json)  # its vocabulary unparsed
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
    return [code_point for code_point in plane_code_points(planes, stride) if code_point not in covered]


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
