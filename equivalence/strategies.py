"""Hypothesis strategies, one per input class tokbackend claims to encode exactly.

Each strategy is small and named for what it generates; `input_classes(tokenizer)` composes
them into the catalogue the property tests and `tokbackend verify` iterate over. Settings
profiles `dev`, `ci` and `thorough` choose how many examples each class gets.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .corpus import KINDS, prompt_text

PROFILES = {"dev": 30, "ci": 60, "thorough": 1000}
for _name, _examples in PROFILES.items():
    settings.register_profile(
        _name,
        max_examples=_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
        derandomize=_name == "ci",
        database=None,
    )


def _chars(*ranges: tuple[int, int]) -> st.SearchStrategy[str]:
    return st.one_of(*(st.integers(low, high).map(chr) for low, high in ranges))


LATIN = _chars((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0xFF))
CJK = _chars((0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3))
CYRILLIC = _chars((0x0400, 0x04FF))
ARABIC = _chars((0x0600, 0x06FF))
DEVANAGARI = _chars((0x0900, 0x097F))
THAI = _chars((0x0E00, 0x0E7F))
SCRIPTS = {"latin": LATIN, "cjk": CJK, "cyrillic": CYRILLIC, "arabic": ARABIC, "devanagari": DEVANAGARI, "thai": THAI}

COMBINING_MARKS = _chars(
    (0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF), (0x0E31, 0x0E3A), (0x093C, 0x094D)
)
UNICODE_SPACES = st.sampled_from(
    [" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u2009", "\u3000", "\u200b", "\u2028", "\x0b", "\x0c"]
)


def words() -> st.SearchStrategy[str]:
    """Space-separated words of one or more scripts."""
    word = st.one_of(*(st.text(alphabet, min_size=1, max_size=12) for alphabet in SCRIPTS.values()))
    return st.lists(word, min_size=1, max_size=30).map(" ".join)


def script_text(script: str) -> st.SearchStrategy[str]:
    """Runs of one script with its own punctuation and spaces."""
    return st.text(st.one_of(SCRIPTS[script], st.sampled_from(" ,.!?;:\n")), min_size=1, max_size=200)


def mixed_scripts() -> st.SearchStrategy[str]:
    """Scripts glued and interleaved, as in multilingual chat."""
    return st.lists(st.one_of(*(script_text(name) for name in SCRIPTS)), min_size=2, max_size=6).map("".join)


def combining_marks() -> st.SearchStrategy[str]:
    """Base letters followed by stacks of combining marks (NFC composes and reorders these)."""
    cluster = st.tuples(st.one_of(LATIN, CYRILLIC, DEVANAGARI, THAI), st.lists(COMBINING_MARKS, max_size=4))
    return st.lists(cluster.map(lambda pair: pair[0] + "".join(pair[1])), min_size=1, max_size=20).map("".join)


def emoji_sequences() -> st.SearchStrategy[str]:
    """ZWJ families, skin tones, flags, keycaps, variation selectors, and text around them."""
    base = _chars((0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF), (0x2600, 0x26FF))
    skin = _chars((0x1F3FB, 0x1F3FF))
    regional = _chars((0x1F1E6, 0x1F1FF))
    zwj = st.lists(base, min_size=2, max_size=4).map("\u200d".join)
    flag = st.tuples(regional, regional).map("".join)
    keycap = st.sampled_from("0123456789#*").map(lambda key: key + "\ufe0f\u20e3")
    toned = st.tuples(base, skin).map("".join)
    sequence = st.one_of(base, zwj, flag, keycap, toned, base.map(lambda e: e + "\ufe0f"))
    return st.lists(st.one_of(sequence, st.sampled_from([" ", "a", "!", "\n"])), min_size=1, max_size=20).map("".join)


def whitespace_runs() -> st.SearchStrategy[str]:
    """Runs of spaces, tabs, CR/LF and unicode spaces between words."""
    run = st.lists(UNICODE_SPACES, min_size=1, max_size=12).map("".join)
    return st.lists(st.one_of(run, st.sampled_from(["x", "word", "if", "42", "."])), min_size=1, max_size=20).map(
        "".join
    )


def digit_runs() -> st.SearchStrategy[str]:
    """Digit runs (ASCII and other scripts' digits), numbers with separators."""
    digits = st.text(
        st.one_of(st.sampled_from("0123456789"), _chars((0x0660, 0x0669), (0x0966, 0x096F), (0xFF10, 0xFF19))),
        min_size=1,
    )
    return st.lists(
        st.one_of(digits, st.sampled_from([".", ",", " ", "-", "e", "x", "%"])), min_size=1, max_size=20
    ).map("".join)


def contractions() -> st.SearchStrategy[str]:
    """English contractions in every case, and apostrophe look-alikes."""
    suffix = st.sampled_from(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "\u2019s", "'"])
    word = st.sampled_from(["it", "don", "we", "they", "I", "she", "ROCK", "x", "", " "])
    return st.lists(st.tuples(word, suffix).map("".join), min_size=1, max_size=10).map(" ".join)


@functools.cache
def recent_and_unassigned() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(code points assigned since this interpreter's Unicode tables, code points unassigned in
    both), in the planes that hold assigned characters. "Since" is read off the `regex`
    package's newer tables, so the set is chosen without looking at any backend or guard."""
    import regex

    assigned = regex.compile(r"\p{Assigned}")
    recent: list[int] = []
    unassigned: list[int] = []
    for plane in (0, 1, 2, 3, 14):
        for code_point in range(plane << 16, (plane + 1) << 16):
            character = chr(code_point)
            if not 0xD800 <= code_point <= 0xDFFF and unicodedata.category(character) == "Cn":
                (recent if assigned.match(character) else unassigned).append(code_point)
    return tuple(recent), tuple(unassigned)


def _spread(pool: tuple[int, ...]) -> st.SearchStrategy[str]:
    # Hypothesis's own draws favour small indices; spreading a wide integer over the pool
    # reaches every block evenly.
    return st.integers(0, 2**64 - 1).map(lambda draw: chr(pool[((draw * 0x9E3779B97F4A7C15) >> 11) % len(pool)]))


# Places where a regex boundary or a normalization step depends on the class of `{0}`.
BOUNDARY_CONTEXTS = (
    "{0}'s", "a{0}'ll", "{0}'T", "'{0}", "{0}:A", "({0})", " {0}.", "{0}!!", "1{0}2", "123{0}4567",
    " {0}", "  {0}", "{0} ", "\n{0}\n", "\t{0}", "A{0}a", "a{0}A", "\u4e2d{0}", "{0}{0}", "a\u0300{0}\u0316",
    "\u0345{0}", "{0}\u0334", "\uac00{0}",
)  # fmt: skip


def recent_code_points() -> st.SearchStrategy[str]:
    """Recently assigned and unassigned code points, one to twelve at a time, each inside a
    regex-boundary context (before a contraction or punctuation, between digits, after
    spaces, among letters of each case, among combining marks), amid words."""
    recent, unassigned = recent_and_unassigned()
    code_point = st.one_of(_spread(recent), _spread(unassigned))
    placed = st.tuples(st.sampled_from(BOUNDARY_CONTEXTS), code_point).map(lambda pair: pair[0].format(pair[1]))
    glue = st.sampled_from(["", " ", "\n", "word ", ", "])
    return st.lists(st.tuples(placed, glue).map("".join), min_size=1, max_size=12).map("".join)


def any_text() -> st.SearchStrategy[str]:
    """Any text from the full Unicode range (no surrogates, which are not valid text)."""
    return st.text(st.characters(blacklist_categories=("Cs",)), max_size=100)


def special_tokens_in_text(added_tokens: list[str]) -> st.SearchStrategy[str]:
    """Special and added tokens glued to text, doubled, and near-misses of them."""
    if not added_tokens:
        return words()
    token = st.sampled_from(added_tokens)
    near_miss = token.flatmap(
        lambda t: st.sampled_from([t[:-1], t[1:], t[: len(t) // 2], t + t[-1], t.upper(), " " + t[:-1] + " "])
    )
    filler = st.one_of(st.sampled_from(["", " ", "\n", "a", "x y", "<", ">", "|", "中"]), words())
    return st.lists(st.one_of(token, near_miss, filler), min_size=1, max_size=12).map("".join)


def long_prompts(tokens: int = 32000) -> st.SearchStrategy[str]:
    """Realistic long prompts (code, prose in many scripts, tables, logs), ~`tokens` tokens,
    half of them with recently assigned code points planted deep inside (past 50%), where a
    check that reads only the start of a text would not see them."""

    def build(seed: int, kind: str, planted: str | None, where: float) -> str:
        text = prompt_text(seed, tokens * 3, kind)
        if planted is None:
            return text
        cut = int(len(text) * where)
        return text[:cut] + " " + planted + " " + text[cut:]

    return st.builds(
        build,
        st.integers(0, 2**32),
        st.sampled_from(sorted(KINDS)),
        st.none() | recent_code_points(),
        st.floats(0.5, 0.999),
    )


def input_classes(added_tokens: list[str]) -> dict[str, Callable[[], st.SearchStrategy[str]]]:
    """The catalogue: input-class name -> strategy factory."""
    classes: dict[str, Callable[[], st.SearchStrategy[str]]] = {
        "words": words,
        "special_tokens_in_text": lambda: special_tokens_in_text(added_tokens),
        "combining_marks": combining_marks,
        "emoji_sequences": emoji_sequences,
        "mixed_scripts": mixed_scripts,
        "whitespace_runs": whitespace_runs,
        "digit_runs": digit_runs,
        "contractions": contractions,
        "recent_code_points": recent_code_points,
        "any_text": any_text,
    }
    for script in SCRIPTS:
        classes[f"script_{script}"] = lambda script=script: script_text(script)
    classes["long_prompts"] = long_prompts
    return classes


# Every counterexample any run has found, pinned forever: `find_mismatch` replays them first
# (as Hypothesis `@example`s) in pytest and in `tokbackend verify`.
EXAMPLES: dict[str, tuple[str, ...]] = {
    # NFC reorders U+1AE6 (combining class 220 in gigatoken's Unicode, 0 in HF's)
    "combining_marks": ("\u00c0\u0300\u1ae6",),
    "recent_code_points": (
        "a\U000113c2\U000113c2",  # a Unicode 16 composition pair that HF's NFC does not know
        "\U000323b0's",  # a Unicode 17 letter before a contraction (Qwen3.6 and Llama-3 splits)
        "a\U000323b0'll",
        "\U000323b0:A",  # ... and before punctuation
    ),
}
