"""Realistic, reproducible, never-seen-before prompt text, built offline.

Code comes from the running interpreter's standard library sources; prose in many scripts
from Faker's locale word lists. Every prompt depends only on its seed, and distinct seeds give
distinct text (a backend that caches what it has seen must not be measured on repeats).
"""

from __future__ import annotations

import functools
import random
import sysconfig
from collections.abc import Callable
from pathlib import Path

PROSE_LOCALES = (
    "en_US", "zh_CN", "ja_JP", "ru_RU", "ar_AA", "th_TH", "el_GR", "he_IL",
    "de_DE", "fr_FR", "es_ES", "vi_VN", "uk_UA", "fa_IR", "bn_BD", "zh_TW",
)  # fmt: skip
# Locales without Faker lorem text: names and addresses carry their script.
NAME_LOCALES = ("hi_IN", "ko_KR")


@functools.cache
def _stdlib_sources() -> tuple[Path, ...]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(path for path in root.glob("*.py") if path.stat().st_size > 4000)
    return tuple(files)


@functools.cache
def _source_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@functools.cache
def _faker(locale: str):
    from faker import Faker

    return Faker(locale)


def code_piece(rng: random.Random, chars: int = 2000) -> str:
    """A slice of real Python source, cut at line boundaries."""
    text = _source_text(rng.choice(_stdlib_sources()))
    start = rng.randrange(max(1, len(text) - chars))
    start = text.find("\n", start) + 1
    return text[start : start + chars]


def prose_piece(rng: random.Random, locale: str | None = None) -> str:
    """A paragraph in one locale's script (random locale unless given)."""
    locale = locale or rng.choice(PROSE_LOCALES + NAME_LOCALES)
    fake = _faker(locale)
    fake.seed_instance(rng.getrandbits(48))
    if locale in NAME_LOCALES:
        return " ".join(fake.name() + ", " + fake.address().replace("\n", " ") for _ in range(4)) + "\n"
    return fake.paragraph(nb_sentences=rng.randint(3, 8)) + "\n\n"


def table_piece(rng: random.Random) -> str:
    """A small Markdown table with numbers, as agents paste into prompts."""
    rows = ["| id | name | score | ratio |", "|---|---|---|---|"]
    for row in range(rng.randint(3, 12)):
        rows.append(f"| {rng.randint(1, 99999)} | item_{row} | {rng.randint(0, 1000)} | {rng.random():.4f} |")
    return "\n".join(rows) + "\n\n"


def log_piece(rng: random.Random) -> str:
    """Server-log lines: timestamps, levels, paths, hex ids."""
    lines = []
    for _ in range(rng.randint(3, 10)):
        level = rng.choice(["INFO", "WARN", "ERROR", "DEBUG"])
        lines.append(
            f"2026-11-{rng.randint(1, 30):02d}T{rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z "
            f"{level} [worker-{rng.randint(0, 63)}] req={rng.getrandbits(64):016x} path=/v1/chat/completions "
            f"latency_ms={rng.uniform(0.1, 900):.2f}"
        )
    return "\n".join(lines) + "\n"


PIECES: dict[str, Callable[[random.Random], str]] = {
    "code": code_piece,
    "prose": prose_piece,
    "table": table_piece,
    "log": log_piece,
}

# Which pieces each prompt kind draws, with weights.
KINDS: dict[str, dict[str, float]] = {
    "code": {"code": 1.0},
    "prose": {"prose": 1.0},
    "mixed": {"code": 0.5, "prose": 0.35, "table": 0.075, "log": 0.075},
}


def prompt_text(seed: int, chars: int, kind: str = "mixed") -> str:
    """About `chars` characters of `kind` text ("code", "prose", "mixed"), fixed by `seed`."""
    rng = random.Random(f"{kind}:{seed}")
    weights = KINDS[kind]
    names, probabilities = list(weights), list(weights.values())
    pieces: list[str] = []
    total = 0
    while total < chars:
        piece = PIECES[rng.choices(names, probabilities)[0]](rng)
        pieces.append(piece)
        total += len(piece)
    return "".join(pieces)[:chars]


def prompt_of_tokens(count_tokens: Callable[[str], int], seed: int, tokens: int, kind: str = "mixed") -> str:
    """A prompt of about `tokens` tokens (within 2%), as counted by `count_tokens`."""
    chars = tokens * 3
    text = prompt_text(seed, chars, kind)
    for _ in range(8):
        have = count_tokens(text)
        if abs(have - tokens) <= tokens * 0.02:
            break
        chars = int(chars * tokens / max(have, 1))
        text = prompt_text(seed, chars, kind)
    return text
