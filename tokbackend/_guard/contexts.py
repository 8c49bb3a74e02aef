"""Scan contexts derived from a tokenizer's own pre-tokenizer and normalizer.

A code point can only make two engines disagree through a Unicode property that one of them
reads differently: the classes the split regex tests (`\\p{L}`, `\\p{Lu}`, `\\p{N}`, `\\s`, ...),
case folding inside `(?i:...)`, and the normalizer's tables (canonical decomposition,
composition, combining class). A property difference only changes ids where it moves a
pre-token boundary or a normalized character, and a boundary only moves where the regex
could draw one: between the code point and a neighbour of another class. So the contexts put
each code point between neighbours drawn from every class and every literal the pattern
distinguishes, on both sides:

- letters of each case class the pattern names (Ll, Lu, Lt, Lm, Lo) and marks (Mn, Mc);
- each contraction alternative after the code point (`X's`, `X'll`) and the code point in
  place of each of its letters (`'X`, `'rX`), which is where case folding shows;
- punctuation and symbols, alone and in runs, and the literals of the pattern (`/`, `'`);
- digits, alone and in runs longer than the pattern's grouping (`\\p{N}{1,3}`);
- each whitespace kind: space, runs of spaces (`\\s+(?!\\S)`), tab, CR/LF, ideographic space;
- for a composing normalizer: the code point doubled and tripled, after a base letter and a
  Hangul jamo, before and after marks of combining class 1 and 240 (the extremes, so a
  combining class known to one engine and not the other reorders in one of them) and of 220
  and 230.

Pairing a left and a right neighbour in one context tests two boundaries at once; every
neighbour appears on each side at least once. Which family a context belongs to is kept, so a
guard can say what kind of divergence each code point showed.
"""

from __future__ import annotations

import dataclasses
import re
from types import MappingProxyType
from typing import Any

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


@dataclasses.dataclass(frozen=True)
class ScanContext:
    """A template with `{0}` where the code point goes, and the family it tests."""

    template: str
    family: str

    def format(self, character: str) -> str:
        return self.template.format(character)


def split_patterns(tokenizer_json: dict[str, Any]) -> list[str]:
    """The Split regexes of a tokenizer.json's pre-tokenizer (inside Sequences too)."""
    found: list[str] = []

    def visit(node: object) -> None:
        if not isinstance(node, dict):
            return
        if node.get("type") == "Split" and isinstance(node.get("pattern"), dict) and "Regex" in node["pattern"]:
            found.append(node["pattern"]["Regex"])
        for child in node.get("pretokenizers", []) or []:
            visit(child)

    visit(tokenizer_json.get("pre_tokenizer"))
    return found


def normalizer_types(tokenizer_json: dict[str, Any]) -> set[str]:
    """The normalizer types of a tokenizer.json (inside Sequences too)."""
    found: set[str] = set()

    def visit(node: object) -> None:
        if not isinstance(node, dict):
            return
        if node.get("type"):
            found.add(node["type"])
        for child in node.get("normalizers", []) or []:
            visit(child)

    visit(tokenizer_json.get("normalizer"))
    return found


def _pairs(family: str, lefts: list[str], rights: list[str]) -> list[ScanContext]:
    """Each left neighbour and each right neighbour used at least once, paired up."""
    count = max(len(lefts), len(rights))
    return [ScanContext(lefts[index % len(lefts)] + "{0}" + rights[(index + 1) % len(rights)], family) for index in range(count)]


def derive_contexts(tokenizer_json: str | dict[str, Any]) -> list[ScanContext]:
    """The scan contexts for one tokenizer (see the module docstring for why they cover it)."""
    spec = top_level_sections(tokenizer_json) if isinstance(tokenizer_json, str) else tokenizer_json  # vocabulary unparsed
    patterns = split_patterns(spec)
    pattern = "|".join(patterns)
    contexts = [ScanContext("{0}", "alone")]

    case_classes = sorted(set(_CASE_CLASSES.findall(pattern))) or ["Ll", "Lo"]
    letters = [LETTERS[name] for name in case_classes if name in LETTERS] or ["a"]
    letters = sorted(set(letters) | {"a", "A", "\u4e2d"})
    contexts += _pairs("letters", letters, letters[::-1])
    contexts += [ScanContext("a{0}b", "letters"), ScanContext("A{0}a", "letters"), ScanContext("a{0}A", "letters")]
    contexts += _pairs("marks", ["a" + MARKS["Mn"], "\u0915" + MARKS["Mc"]], list(MARKS.values()))

    suffixes = sorted(set(_CONTRACTION.findall(pattern))) or ["s", "t", "re", "ve", "m", "ll", "d"]
    contexts += [ScanContext("{0}'" + suffix, "contractions") for suffix in suffixes]
    contexts += [ScanContext("a{0}'" + suffixes[0], "contractions"), ScanContext(" {0}'" + suffixes[-1], "contractions")]
    # The code point in place of each letter of each alternative: case folding ('ſ' ~ 's').
    folded = {"'" + suffix[:index] + "{0}" + suffix[index + 1 :] for suffix in suffixes for index in range(len(suffix))}
    contexts += [ScanContext(template, "case_folding") for template in sorted(folded)]

    # Characters the pattern names literally (quantifiers and class syntax are not among them).
    literals = sorted({character for character in re.sub(r"\\[pP]\{\w+\}|\\.", "", pattern) if character in "/'@#%&=<>~`_"})
    punctuation = list(PUNCTUATION) + [literal for literal in literals if literal not in PUNCTUATION]
    contexts += _pairs("punctuation", punctuation, punctuation[::-1])
    contexts += [ScanContext("{0}:A", "punctuation"), ScanContext(" {0}!!", "punctuation"), ScanContext("a.{0}.", "punctuation")]

    group = _DIGIT_GROUP.search(pattern)
    run = "1" * (int(group.group(1)) + 1 if group else 4)
    contexts += [
        ScanContext("1{0}2", "digits"),
        ScanContext(run + "{0}" + run, "digits"),
        ScanContext("12{0}a", "digits"),
        ScanContext("a{0}123", "digits"),
        ScanContext("\u0661{0}\u00b2", "digits"),
    ]

    contexts += _pairs("whitespace", list(SPACES), list(SPACES[::-1]))
    contexts += [
        ScanContext("a  {0}", "whitespace"),
        ScanContext("{0}  a", "whitespace"),
        ScanContext("a {0} a", "whitespace"),
        ScanContext("{0}\n\n", "whitespace"),
    ]

    if normalizer_types(spec) & _COMPOSING:
        contexts += [
            ScanContext("{0}{0}", "normalizer"),
            ScanContext(" {0}{0}{0}x", "normalizer"),
            ScanContext("e{0}\u0334", "normalizer"),
            ScanContext("a\u0345{0}", "normalizer"),
            ScanContext("a\u0300\u0300{0}", "normalizer"),
            ScanContext("a{0}\u0316", "normalizer"),
            ScanContext("\u1100{0}\u11a8", "normalizer"),
            ScanContext("\uac00{0}\u1161", "normalizer"),
            ScanContext("\u0915{0}\u093c", "normalizer"),
        ]
    seen: set[str] = set()
    unique = []
    for context in contexts:
        if context.template not in seen:
            seen.add(context.template)
            unique.append(context)
    return unique
