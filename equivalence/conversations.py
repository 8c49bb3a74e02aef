"""Agent conversations for the segment cache: texts whose pieces repeat across requests.

`conversations(added_tokens, guarded)` draws ChatML conversations whose messages come from
every input class, with edge content where the segment cache cuts (right after and right before
an added token): leading and trailing whitespace, combining marks and contractions first,
partial special-token text (`<|im_end`), non-special added tokens (`<think>`, `<tool_call>`)
inside messages, and code points the Unicode guard sends to HuggingFace.
`turn_by_turn(encode)` turns a one-text encoder into the encoder a property compares: it encodes
every prefix of the conversation that ends a message, in order (so later prefixes hit what
earlier ones cached), and returns all their ids, separated by -1.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from equivalence.strategies import combining_marks, contractions, input_classes

MESSAGE_END = "<|im_end|>\n"

EDGES = (" ", "  ", "\n", "\n\n", "\t", "'s", "'ll", "\u0301", "\u0300\u0316", "<|im_end", "<|im_start|", "|>", "<", ">", "")


def message_bodies(added_tokens: list[str], guarded: list[int]) -> st.SearchStrategy[str]:
    classes = input_classes(added_tokens)
    body = st.one_of(*(factory() for name, factory in classes.items() if name != "long_prompts"))
    edge = st.one_of(st.sampled_from(EDGES), combining_marks(), contractions())
    inner_tokens = [token for token in added_tokens if token.startswith("<") and "|" not in token] or added_tokens
    extras = [st.sampled_from(inner_tokens)] if inner_tokens else []
    if guarded:
        extras.append(st.sampled_from(guarded).map(chr))
    middle = st.lists(st.one_of(body, *extras), min_size=0, max_size=4).map("".join)
    return st.tuples(edge, middle, edge).map("".join)


def conversations(added_tokens: list[str], guarded: list[int]) -> st.SearchStrategy[str]:
    """One rendered ChatML conversation of 1-6 messages (see the module docstring)."""
    role = st.sampled_from(["system", "user", "assistant", "tool"])
    message = st.tuples(role, message_bodies(added_tokens, guarded)).map(
        lambda pair: f"<|im_start|>{pair[0]}\n{pair[1]}{MESSAGE_END}"
    )
    shared_system = st.sampled_from(["", '<|im_start|>system\nYou are a coding agent. Tools: {"read": {}}<|im_end|>\n'])
    return st.tuples(shared_system, st.lists(message, min_size=1, max_size=6)).map(lambda pair: pair[0] + "".join(pair[1]))


def turn_by_turn(encode: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    def encode_turns(conversation: str) -> list[int]:
        ids: list[int] = []
        end = conversation.find(MESSAGE_END)
        while end != -1:
            ids.extend(encode(conversation[: end + len(MESSAGE_END)]))
            ids.append(-1)
            end = conversation.find(MESSAGE_END, end + len(MESSAGE_END))
        ids.extend(encode(conversation))
        return ids

    return encode_turns
