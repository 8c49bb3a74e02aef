"""Built-in text: for warming a fresh backend up, and for `auto`'s timing of candidates."""

from __future__ import annotations

import functools

from tokbackend._package_data import package_path


@functools.lru_cache(maxsize=2)
def builtin_texts(chars: int = 4_000_000, piece: int = 100_000) -> tuple[str, ...]:
    """Real text: the Python sources of the installed transformers package (code, English
    docstrings), read in a fixed order, cut into `piece`-character texts.

    A fresh backend's workers start with empty caches and cold allocators, which makes the first
    burst of long prompts 3-4x slower than later ones; encoding this once at build time moves that
    cost off the first requests a replica receives. The text is independent of anything a
    benchmark or a user sends, so it warms, it does not memorize.
    """
    pieces: list[str] = []
    total = 0
    for path in sorted(package_path("transformers", ".").glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        pieces.append(text)
        total += len(text)
        if total >= chars:
            break
    corpus = "".join(pieces)[:chars]
    return tuple(corpus[start : start + piece] for start in range(0, len(corpus), piece))
