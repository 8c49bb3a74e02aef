"""The boot probe: a short equality check of a freshly built backend against HuggingFace, on edge
strings chosen to break a tokenizer that is almost right."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tokbackend.backends._arrays import in_call_forms
from tokbackend.backends._base import PanicConverter

# How a build hands a text to its backend: whole ([text]), as pieces and added tokens' ids split
# at them (`tokbackend._added_tokens`), or not at all (None: HuggingFace answers it).
PiecesOf = Callable[[str], "list[str | int] | None"]

if TYPE_CHECKING:
    from tokbackend._guard import UnicodeGuard
    from tokbackend._reference import Reference
    from tokbackend.backends import EncodeBackend

EDGE_STRINGS = (
    "",
    " ",
    "Hello, world!",
    "  leading and trailing  ",
    "tabs\tand\r\nCRLF\n\n\nblank lines\u3000ideographic\u00a0nbsp\u2009thin",
    "digits 1 12 123 1234 12345678901234567890 3.14159 1,000,000",
    "don't I'll we've they're she'd it's DON'T I'LL",
    "e\u0301 A\u030a \u1e9b\u0323 \u0071\u0307\u0323 \uac00\u11a8 \u1100\u1161\u11a8",  # NFC compositions
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f44d\U0001f3fd",  # ZWJ family, skin tone
    "\U0001f1fa\U0001f1f8 1\ufe0f\u20e3 #\ufe0f\u20e3",  # flag, keycaps
    "中文字符，日本語のテキスト、한국어 텍스트。",
    "Русский текст, ελληνικά, עברית, العربية، हिन्दी देवनागरी, ภาษาไทย",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n\tif x >= 0x1F: pass\n",
    "<|im_start|",
    "<|im_start|>>",
    "<<|im_end|>",
    "<|endoftext|>x<|endoftext|>",
    "a" * 300,
    " " * 100 + "x",
    "\n" * 50,
)


def first_difference(left: list[int], right: list[int]) -> int:
    """Index of the first position where two id lists differ (the shorter length if one is a prefix)."""
    for index, (one, other) in enumerate(zip(left, right)):
        if one != other:
            return index
    return min(len(left), len(right))


@dataclasses.dataclass(frozen=True)
class ProbeMismatch:
    """The first probe string on which the backend's ids differ from HuggingFace's."""

    text: str
    backend_ids: list[int]
    hf_ids: list[int]

    def describe(self) -> str:
        """The text, where the ids part, and the first ids of each side."""
        return (
            f"{self.text!r} (first difference at index {first_difference(self.backend_ids, self.hf_ids)}: "
            f"backend {self.backend_ids[:12]}, HF {self.hf_ids[:12]})"
        )


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """How many strings were compared, in how long, and the first mismatch if any."""

    strings: int
    seconds: float
    mismatch: ProbeMismatch | None


def run_probe(
    backend: EncodeBackend, reference: Reference, guard: UnicodeGuard, pieces_of: PiecesOf = lambda text: [text]
) -> ProbeResult:
    """Compare `backend` with HuggingFace on the edge strings and the added tokens in and around
    text, leaving out what the guard sends to HuggingFace; each reaches the backend as `pieces_of` hands it over."""
    strings = list(EDGE_STRINGS)
    tokens = sorted(reference.added_tokens())
    for token in tokens:
        strings.extend((token, f"a{token}b", f" {token} ", f"x\n{token}\n\ny", f"{token}{token}", token[:-1]))
    strings.extend(side_by_side(tokens))
    return _compared(backend, [text for text in strings if not guard.needs_hf(text)], reference.hf_ids, pieces_of)


def side_by_side(tokens: list[str], most: int = 64) -> list[str]:
    """Added tokens glued to the next, cut short before it, and, up to `most`, joined where
    one's end is another's start."""
    strings: list[str] = []
    for token, after in zip(tokens, tokens[1:] + tokens[:1]):
        strings.extend((f"{token}{after}", f"{token[:-1]}{after}", f"{token} {after}"))
    overlaps = 0
    for token in tokens:
        for other in tokens:
            shared = next(
                (size for size in range(min(len(token), len(other)) - 1, 0, -1) if token.endswith(other[:size])), 0
            )
            if shared and overlaps < most:
                strings.append(f"{token}{other[shared:]}")
                overlaps += 1
    return strings


def ascii_probe(backend: EncodeBackend, hf_ids: Callable[[list[str]], list[list[int]]]) -> ProbeResult:
    """`run_probe` on the ASCII edge strings alone, which no guard sends to HuggingFace (run
    before a guard is derived)."""
    return _compared(backend, [text for text in EDGE_STRINGS if text.isascii()], hf_ids, lambda text: [text])


def _compared(
    backend: EncodeBackend, strings: list[str], hf_ids: Callable[[list[str]], list[list[int]]], pieces_of: PiecesOf
) -> ProbeResult:
    started = time.perf_counter()
    split = {text: parts for text in strings if (parts := pieces_of(text)) is not None}
    strings = list(split)
    pieces = list(dict.fromkeys(part for parts in split.values() for part in parts if isinstance(part, str)))
    expected = hf_ids(strings)
    try:
        with PanicConverter(getattr(backend, "name", type(backend).__name__)):
            forms = in_call_forms(backend, pieces)
        mismatch = None
        for answers in forms:
            of_piece = dict(zip(pieces, answers))
            for text, hf in zip(strings, expected):
                ids = [
                    part_id for part in split[text] for part_id in (of_piece[part] if isinstance(part, str) else [part])
                ]
                if ids != hf:
                    mismatch = mismatch or ProbeMismatch(text, ids, hf)
    except Exception as error:  # a backend that cannot encode edge strings (or panics) is not exact either
        mismatch = ProbeMismatch(f"<backend raised {error!r}>", [], [])
    return ProbeResult(len(strings), time.perf_counter() - started, mismatch)
