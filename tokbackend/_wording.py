"""How counts read in what tokbackend prints: "1 code point", "2 code points"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in the form that count takes; `plural` where adding "s" is wrong.

    >>> counted(1, "code point"), counted(4859, "code point"), counted(2, "input class", "input classes")
    ('1 code point', '4859 code points', '2 input classes')
    """
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"
