"""Agent conversations for the segment cache: texts whose pieces repeat across requests.

`conversations(added_tokens, guarded)` draws ChatML conversations whose messages come from
every input class, with edge content where the segment cache cuts (right after and right before
an added token): leading and trailing whitespace, combining marks and contractions first,
partial special-token text (`<|im_end`), non-special added tokens (`<think>`, `<tool_call>`)
inside messages, and code points the Unicode guard sends to HuggingFace.
`turn_by_turn(encode, cut_after)` turns a one-text encoder into the encoder a property compares:
it encodes the whole conversation first, as a fresh replica meets an agent's request (every piece
split and looked up, with no remembered prefix of it: the splitter at work on every added token),
then every prefix of it that ends a message (or, given added tokens, ends with one of them: where
the prefix memo's boundaries fall, including inside a longer added token), in order, so later
prefixes hit what earlier ones cached, then the whole again, and returns all their ids, separated
by -1. Without the first whole encode, a memo that answers every earlier turn leaves each split
one added token long, and a splitter that cuts in the wrong place between two pieces is never
seen (a planted one passed verify's segments step so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hypothesis import strategies as st

from .strategies import combining_marks, contractions, input_classes

MESSAGE_END = "<|im_end|>\n"

EDGES = (
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "'s",
    "'ll",
    "\u0301",
    "\u0300\u0316",
    "<|im_end",
    "<|im_start|",
    "|>",
    "<",
    ">",
    "",
)


def guarded_sample(code_points: Iterable[int], most: int = 40) -> list[int]:
    """About `most` of a Unicode guard's code points, spread over its range, to plant in messages."""
    ordered = sorted(code_points)
    return ordered[:: max(1, len(ordered) // most)]


def message_bodies(added_tokens: list[str], guarded: list[int]) -> st.SearchStrategy[str]:
    classes = input_classes(added_tokens)
    body = st.one_of(*(factory() for name, factory in classes.items() if name != "long_prompts"))
    edge = st.one_of(st.sampled_from(EDGES), combining_marks(), contractions())
    inner_tokens = [token for token in added_tokens if token.startswith("<") and "|" not in token] or added_tokens
    # each piece of text is followed by nothing, an added token or a guarded code point, with
    # even odds per choice (inside `one_of`, one choice among ~20 input classes would be rare)
    after = st.sampled_from(["", *inner_tokens])
    if guarded:
        after = st.one_of(after, st.sampled_from(guarded).map(chr))
    middle = st.lists(st.tuples(body, after).map("".join), min_size=0, max_size=4).map("".join)
    return st.tuples(edge, middle, edge).map("".join)


def conversations(added_tokens: list[str], guarded: list[int]) -> st.SearchStrategy[str]:
    """One rendered ChatML conversation of 1-6 messages (see the module docstring)."""
    role = st.sampled_from(["system", "user", "assistant", "tool"])
    message = st.tuples(role, message_bodies(added_tokens, guarded)).map(
        lambda pair: f"<|im_start|>{pair[0]}\n{pair[1]}{MESSAGE_END}"
    )
    shared_system = st.sampled_from(["", '<|im_start|>system\nYou are a coding agent. Tools: {"read": {}}<|im_end|>\n'])
    return st.tuples(shared_system, st.lists(message, min_size=1, max_size=6)).map(
        lambda pair: pair[0] + "".join(pair[1])
    )


def turn_by_turn(encode: Callable[[str], list[int]], cut_after: Iterable[str] = ()) -> Callable[[str], list[int]]:
    cuts = sorted({MESSAGE_END, *cut_after} - {""})

    def encode_turns(conversation: str) -> list[int]:
        ends = set()  # the end of every occurrence of every cut text, overlapping ones too
        for text in cuts:
            start = conversation.find(text)
            while start != -1:
                ends.add(start + len(text))
                start = conversation.find(text, start + 1)
        ids = list(encode(conversation))
        ids.append(-1)
        for end in sorted(ends):
            ids.extend(encode(conversation[:end]))
            ids.append(-1)
        ids.extend(encode(conversation))
        return ids

    return encode_turns
