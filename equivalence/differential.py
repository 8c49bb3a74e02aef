"""Differential runner: the same input through two tokenizers, call by call.

A mismatch is reported the way a person debugging it wants to read it: the (shrunk) input as
`repr`, both id lists around the first index where they differ, and that index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hypothesis import example, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from equivalence.strategies import EXAMPLES
from tokbackend.probe import first_difference

Encoder = Callable[[str], list[int]]


class Disagreement(AssertionError):
    """Raised inside the property so Hypothesis shrinks the input that caused it."""


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One input on which two encoders disagree."""

    input_class: str
    text: str
    expected: list[int]
    actual: list[int]

    @property
    def first_difference(self) -> int:
        return first_difference(self.expected, self.actual)

    def report(self, context: int = 6) -> str:
        start = max(0, self.first_difference - context)
        end = self.first_difference + context
        text = self.text  # a str, or another input (a call's arguments) shown as its repr
        shown = f"{text[:300]!r}... ({len(text):,} characters)" if isinstance(text, str) and len(text) > 2000 else repr(text)
        return (
            f"[{self.input_class}] input {shown}\n"
            f"  first difference at index {self.first_difference}\n"
            f"  reference[{start}:{end}] = {self.expected[start:end]}\n"
            f"  candidate[{start}:{end}] = {self.actual[start:end]}\n"
            f"  lengths: reference {len(self.expected)}, candidate {len(self.actual)}"
        )


def in_every_form(tokenizer) -> Encoder:
    """`tokenizer.encode` as a list, checked against the same encode inside `ids_as_arrays()`
    (SGLang's form: `array('q')` from the backend's buffer, a path of its own below the
    tokenizer): the list, or, where the two forms differ, the array's ids, so a wrong array path
    is a mismatch like any other."""
    from tokbackend import ids_as_arrays

    def encode(text: str) -> list[int]:
        ids = tokenizer.encode(text)
        with ids_as_arrays():
            as_array = tokenizer.encode(text)
        return ids if list(as_array) == ids else list(as_array)

    return encode


def compare(reference: Encoder, candidate: Encoder, text: str, input_class: str = "text") -> Mismatch | None:
    """None when both encoders give the same ids for `text`, else the mismatch."""
    expected, actual = reference(text), candidate(text)
    return None if expected == actual else Mismatch(input_class, text, list(expected), list(actual))


def find_mismatch(
    reference: Encoder,
    candidate: Encoder,
    strategy: st.SearchStrategy[str],
    input_class: str,
    profile: settings,
    seed: int | None = None,
) -> Mismatch | None:
    """Search `strategy` for an input the encoders disagree on; return it shrunk, or None.

    The class's pinned counterexamples (`equivalence.strategies.EXAMPLES`) run first. Hypothesis
    replays the minimal failing example last, so the mismatch kept is the shrunk one. A candidate
    with state (a segment cache, whose memo answers the second try of a text differently from the
    first) may not fail again on the replay, which Hypothesis reports as flaky: a mismatch seen
    once is one, and the last one seen is returned.
    """
    found: list[Mismatch] = []

    @settings(profile, report_multiple_bugs=False)
    @given(strategy)
    def property_holds(text: str) -> None:
        mismatch = compare(reference, candidate, text, input_class)
        if mismatch is not None:
            found.append(mismatch)
            raise Disagreement(mismatch.report())

    for pinned in EXAMPLES.get(input_class, ()):
        property_holds = example(pinned)(property_holds)

    if seed is not None:
        property_holds = hypothesis_seed(seed)(property_holds)
    try:
        property_holds()
    except (Disagreement, Flaky):
        if not found:
            raise
        return found[-1]
    return None
