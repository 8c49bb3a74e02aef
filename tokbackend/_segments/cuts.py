"""One long text as a batch of its pieces, cut where HuggingFace's ids cannot join across.

fastokens' batch call gives each text a thread of its pool, while one text gets its few BPE
threads: a 32k-token prompt took 0.74 ms whole and 0.50 ms as pieces of 4,096 characters on 16
cores (0.81 and 0.64 on 2), but 1.48 ms as 3-4 pieces, each then on one thread; so only a text
of at least eight pieces is cut. Cut after a newline that a printable ASCII character follows, the
pieces' ids concatenated are the text's ids wherever HF's are too. That depends on the
normalizer, the pre-tokenizer and the model: a `\\s+(?!\\S)` rule keeps " \\n" whole at a text's end
and splits it before a word; a Metaspace "first" scheme puts "▁" before every piece's first word;
a merge of "\\n" with what follows joins across; an added token with `lstrip` takes the newline
before it. So `cuts_fail` asks HF per tokenizer, as the segment cache's premise is asked, with
every printable ASCII character after the newline, many kinds of text before it, and each added
token on either side.
"""

from __future__ import annotations

import re

from tokbackend.backends._base import BatchEncoder

# A piece is at least this long, and a text is cut into at least this many or not at all.
PIECE_CHARS = 4096
FEWEST_PIECES = 8
LONG_TEXT_CHARS = FEWEST_PIECES * PIECE_CHARS
# A cut falls after the newline: a match's end.
CUT = re.compile(r"\n(?=[!-~])")

# What stands before a cut's newline, in the texts that check the premise: nothing (the text starts
# there), words, spaces and tabs before it (the `\s+(?!\S)` case), other newlines and carriage
# returns, punctuation (which a rule may join with the newline), digits, apostrophes, marks, other
# scripts, a no-break space, an emoji.
_BEFORE = (
    "",
    "x",
    "word",
    "x ",
    "x  ",
    " ",
    "\t",
    "x\t ",
    "\r",
    "\n",
    "x\n",
    "x \n",
    "x\r\n",
    ".",
    "x.",
    "x. ",
    "x:",
    "}",
    "1",
    "x12",
    "'",
    "x'",
    "x,",
    "\u00e9",
    "\u4e2d\u6587",
    "x\u0301",
    "x\u00a0",
    "x\u3000",
    "\U0001f600",
    "x\\",
)
# What follows a cut, every printable ASCII character first: alone, before a word, and before a
# space and a word.
_AFTER_TAILS = ("", "x", " x", "he end.")
# And longer starts, after each of the texts above.
_AFTER_STARTS = ("A", "a", "The", "s", "'s", "'ll", "1", "123456", ".", "{", "#", '"x"', "x\n", "x\u00e9", "x\u4e2d")


def cut(text: str, piece_chars: int = PIECE_CHARS, fewest: int = FEWEST_PIECES) -> list[str]:
    """`text` in pieces of at least `piece_chars` characters, each but the last ending at a cut
    (`CUT`), so about `len(text) // piece_chars` of them where cuts are found; `[text]` where
    fewer than `fewest` are found (a few pieces encode slower than the whole). Each window of
    `piece_chars` after a piece's minimum length is searched once: one pass over the text at most."""
    size = len(text)
    pieces: list[str] = []
    start, position = 0, piece_chars
    search = CUT.search
    while size - position >= piece_chars:
        # a newline in [position, position + piece_chars), its next character seen (one past the
        # end), and the piece after the cut at least `piece_chars` long
        found = search(text, position, min(position + piece_chars, size - piece_chars) + 1)
        if found is None:  # no cut in this window: the piece grows by it
            position += piece_chars
            continue
        end = found.end()
        pieces.append(text[start:end])
        start, position = end, end + piece_chars
    if len(pieces) + 1 < fewest:
        return [text]
    pieces.append(text[start:])
    return pieces


def cuts_fail(hf_ids: BatchEncoder, added_tokens: list[str]) -> str | None:
    """Why HuggingFace's ids of a text are not its pieces' ids concatenated at a cut (`CUT`); None
    when they are on every premise text (see the module docstring). `added_tokens`: the contents
    of the tokenizer's added tokens; one that holds a cut itself would be cut in two."""
    for token in added_tokens:
        if CUT.search(token):
            return f"the added token {token!r} holds a newline before a printable character"
    printable = [chr(code) for code in range(0x21, 0x7F)]
    pairs = [(before, start + tail) for before in ("", "x", "x  ", "x.", "\n") for start in printable for tail in _AFTER_TAILS]
    pairs += [(before, after) for before in _BEFORE for after in _AFTER_STARTS]
    for token in added_tokens:
        pairs += [(token, "x"), ("x" + token, "x"), ("x" + token + " ", "'s")]
        if "!" <= token[:1] <= "~":  # where a text may be cut before it
            pairs += [("x", token + "x"), ("x ", token), ("", token)]
    heads = list(dict.fromkeys(before + "\n" for before, _ in pairs))
    tails = list(dict.fromkeys(after for _, after in pairs))
    alone = dict(zip(heads + tails, hf_ids(heads + tails)))
    texts = [before + "\n" + after for before, after in pairs]
    for text, (before, after), expected in zip(texts, pairs, hf_ids(texts)):
        if alone[before + "\n"] + alone[after] != expected:
            return (
                f"ids do not join at a newline: HF gives {expected[:8]} for {text!r}, "
                f"{alone[before + chr(10)][:8]} + {alone[after][:8]} for its pieces"
            )
    return None


__all__ = ["CUT", "FEWEST_PIECES", "LONG_TEXT_CHARS", "PIECE_CHARS", "cut", "cuts_fail"]
