"""Built-in text for warming a fresh backend up."""

from __future__ import annotations

import functools

from tokbackend._package_data import package_path


@functools.lru_cache(maxsize=2)
def builtin_texts(chars: int = 4_000_000, piece: int = 100_000) -> tuple[str, ...]:
    """Real text (the installed transformers' Python sources, in a fixed order) cut into
    `piece`-character texts, to fill a fresh backend's caches before the first requests."""
    pieces: list[str] = []
    total = 0
    for path in sorted(package_path("transformers", ".").glob("*.py")):
        pieces.append(path.read_text(encoding="utf-8", errors="replace"))
        total += len(pieces[-1])
        if total >= chars:
            break
    corpus = "".join(pieces)[:chars]
    return tuple(corpus[start : start + piece] for start in range(0, len(corpus), piece))
