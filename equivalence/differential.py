"""Differential runner: the same input through two tokenizers, call by call.

An answer is the ids or the exception a call raised (`answer_of`): HF raising is an answer to
compare, not a crash of the gate, and a candidate that raises where HF answers is a mismatch.
A mismatch is reported the way a person debugging it wants to read it: the (shrunk) input as
`repr`, both answers around the first index where they differ, and that index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from tokbackend._probe import first_difference
from tokbackend.backends._base import is_error

from .strategies import EXAMPLES

Encoder = Callable[[str], list[int]]


@dataclasses.dataclass(frozen=True)
class Raised:
    """A call's exception as its answer: two answers agree when they raise the same class (the
    message is shown, not compared: HF's wording is no contract)."""

    name: str
    message: str = dataclasses.field(compare=False)

    def __str__(self) -> str:
        first_line = self.message.strip().splitlines()[0][:200] if self.message.strip() else ""
        return f"raises {self.name}" + (f": {first_line}" if first_line else "")


def answer_of(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, or the `Raised` it raised: any Exception, and a Rust panic
    (pyo3's PanicException, a BaseException); KeyboardInterrupt and the like go through."""
    try:
        return function(*args, **kwargs)
    except BaseException as error:  # noqa: BLE001 - the exception is the answer
        if not is_error(error):
            raise
        return Raised(type(error).__name__, str(error))


class Disagreement(AssertionError):
    """Raised inside the property so Hypothesis shrinks the input that caused it."""


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One input on which two encoders disagree."""

    input_class: str
    text: str
    expected: list[int] | Raised
    actual: list[int] | Raised

    @property
    def first_difference(self) -> int:
        if isinstance(self.expected, Raised) or isinstance(self.actual, Raised):
            return 0
        return first_difference(self.expected, self.actual)

    def report(self, context: int = 6) -> str:
        text = self.text  # a str, or another input (a call's arguments) shown as its repr
        shown = (
            f"{text[:300]!r}... ({len(text):,} characters)"
            if isinstance(text, str) and len(text) > 2000
            else repr(text)
        )
        if isinstance(self.expected, Raised) or isinstance(self.actual, Raised):
            return (
                f"[{self.input_class}] input {shown}\n"
                f"  first difference at index 0: one side raised\n"
                f"  reference: {str(self.expected)[:300]}\n"
                f"  candidate: {str(self.actual)[:300]}"
            )
        start = max(0, self.first_difference - context)
        end = self.first_difference + context
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
    """None when both encoders give the same answer for `text` (the same ids, or an exception of
    the same class), else the mismatch."""
    expected, actual = answer_of(reference, text), answer_of(candidate, text)
    if expected == actual:
        return None
    return Mismatch(
        input_class, text, *(answer if isinstance(answer, Raised) else list(answer) for answer in (expected, actual))
    )


def find_mismatch(
    reference: Encoder,
    candidate: Encoder,
    strategy: st.SearchStrategy[str],
    input_class: str,
    profile: settings,
    seed: int | None = None,
) -> Mismatch | None:
    """Search `strategy` for an input the encoders disagree on; return it shrunk, or None.

    The class's pinned counterexamples (`tokbackend.equivalence.strategies.EXAMPLES`) run first. Hypothesis
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
