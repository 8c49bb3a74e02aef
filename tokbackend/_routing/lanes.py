"""Lanes and routings: which backend, with which Unicode guard, answers which call.

A lane is one backend built for one tokenizer, with its guard; a routing names the lane that
answers every call, and why. `NoExactBackend`: no backend can serve this tokenizer exactly.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tokbackend._cache_dir import cache_dir
from tokbackend._errors import TokbackendError
from tokbackend._guard import GuardUnavailableError, UnicodeGuard, load_guard
from tokbackend._guard.derive import in_every_call_form
from tokbackend._probe import PiecesOf, ascii_probe, run_probe
from tokbackend._process.threads import BackgroundThread
from tokbackend.backends import EncodeBackend, backend_class
from tokbackend.backends._arrays import encode_array, encode_batch_arrays
from tokbackend.backends._base import BackendUnavailableError, BatchEncoder, PanicConverter
from tokbackend.backends._renewal import RenewingBackend

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._reference import Reference

# Up to this many texts of a `one_by_one` call get single-text calls, which split a long text
# across the pool where a batch call gives each text one thread.
FEW_TEXTS = 4


class Shortfall(str, enum.Enum):
    """Why no routing was made; `tokbackend._build` turns each into raising or serving with HF."""

    UNAVAILABLE = "unavailable"  # the named backend cannot load the tokenizer
    INEXACT = "inexact"  # it loads, but its guard is refused or the boot probe found a mismatch
    NO_CANDIDATE = "no_candidate"  # auto: no candidate both loads and is exact


class NoExactBackend(TokbackendError):
    """Raised by routing; `reason` is `stats()["disabled_reason"]`, `strict_message` what
    `FastPathError` says, `routing` and `probe_seconds` what was built and probed before."""

    def __init__(
        self,
        shortfall: Shortfall,
        reason: str,
        strict_message: str | None = None,
        routing: Routing | None = None,
        probe_seconds: float = 0.0,
    ) -> None:
        super().__init__(reason)
        self.shortfall = shortfall
        self.reason = reason
        self.strict_message = strict_message or f"tokbackend: {reason} (strict=True)"
        self.routing = routing
        self.probe_seconds = probe_seconds


@dataclasses.dataclass(frozen=True)
class Lane:
    """A backend with the Unicode guard derived for it."""

    name: str
    backend: EncodeBackend
    guard: UnicodeGuard


@dataclasses.dataclass(frozen=True)
class Routing:
    """The lane that answers every call, and why."""

    lane: Lane
    reason: str

    def describe(self) -> dict[str, str]:
        """`stats()["routing"]`."""
        return {"backend": self.lane.name, "reason": self.reason}

    def encode(
        self, texts: list[str], hf_ids: BatchEncoder, one_by_one: bool = False, arrays: bool = False
    ) -> tuple[list[Any], set[int]]:
        """(ids of each text, indexes of the texts the Unicode guard sent to HuggingFace); the
        backend answers the others (`array('q')`s with `arrays`)."""
        lane = self.lane
        if len(texts) == 1:  # the common call, without the bookkeeping of a batch
            text = texts[0]
            if lane.guard.needs_hf(text):
                sequence = hf_ids(texts)[0]
                return [array("q", sequence) if arrays else sequence], {0}
            return [encode_array(lane.backend, text) if arrays else lane.backend.encode(text)], set()
        few = one_by_one and len(texts) <= FEW_TEXTS
        guarded = lane.guard.guarded(texts)
        rest = [index for index in range(len(texts)) if index not in guarded]
        ids: list[Any] = [None] * len(texts)
        if rest:
            backend = lane.backend
            if few:
                one = functools.partial(encode_array, backend) if arrays else backend.encode
                answered: Sequence[list[int] | array[int]] = [one(texts[index]) for index in rest]
            else:
                rest_texts = [texts[index] for index in rest]
                answered = encode_batch_arrays(backend, rest_texts) if arrays else backend.encode_batch(rest_texts)
            for index, answer in zip(rest, answered):
                ids[index] = answer
        if guarded:
            order = sorted(guarded)
            for index, sequence in zip(order, hf_ids([texts[i] for i in order])):
                ids[index] = array("q", sequence) if arrays else sequence
        return ids, guarded


def build_lane(name: str, tokenizer_json: str, options: AccelerationOptions, reference: Reference) -> Lane:
    """Build backend `name` for this tokenizer.json with its exact guard, the backend loading on
    a thread of its own meanwhile; one wrong on ASCII is refused before any derivation. Raises
    BackendUnavailableError (any error, named) and GuardUnavailableError."""
    try:
        with PanicConverter(name, "building its lane", BackendUnavailableError):
            kind = backend_class(name)

            def load() -> EncodeBackend:
                if kind.grows_without_bound and options.cache_budget_mib is not None:
                    return RenewingBackend(lambda: kind(tokenizer_json, kind.Options()), options.cache_budget_mib)
                return kind(tokenizer_json, kind.Options())

            loading = BackgroundThread(load, "tokbackend-backend-load")

            def wrong_on_ascii() -> str | None:
                if (mismatch := ascii_probe(loading.result(), reference.hf_ids).mismatch) is None:
                    return None
                text = mismatch.describe()
                return (
                    f"the backend disagrees with HuggingFace on the ASCII text {text}, which no guard sends "
                    f"to HuggingFace"
                )

            try:
                guard = load_guard(
                    tokenizer_json,
                    kind,
                    options.unicode_guard if kind.needs_unicode_guard else "off",
                    cache_dir(),
                    options.guard,
                    served=(reference.rust_ids, lambda texts: in_every_call_form(loading.result())(texts)),
                    refuses=wrong_on_ascii if options.probe else None,
                )
            except BaseException:
                loading.result()  # a backend that cannot load is the clearer cause: raise that first
                raise
            return Lane(name, loading.result(), guard)
    except (BackendUnavailableError, GuardUnavailableError, ImportError):
        raise
    except Exception as error:
        raise BackendUnavailableError(
            f"backend {name}: building its lane failed: {type(error).__name__}: {error}"
        ) from error


def probed_lane(
    name: str, tokenizer_json: str, options: AccelerationOptions, reference: Reference, model: str, pieces_of: PiecesOf
) -> tuple[Lane, float]:
    """(backend `name`'s lane, seconds spent probing it); raises NoExactBackend."""
    try:
        lane = build_lane(name, tokenizer_json, options, reference)
    except BackendUnavailableError as error:
        raise NoExactBackend(Shortfall.UNAVAILABLE, str(error)) from error
    except GuardUnavailableError as error:
        raise NoExactBackend(Shortfall.INEXACT, str(error), strict_message=f"tokbackend: {model}: {error}") from error
    if not options.probe:
        return lane, 0.0
    result = run_probe(lane.backend, reference, lane.guard, pieces_of)
    if result.mismatch is not None:
        why = f"probe mismatch: backend {name!r} disagrees with HuggingFace for {model} on {result.mismatch.describe()}"
        raise NoExactBackend(
            Shortfall.INEXACT, why, routing=Routing(lane, "named explicitly"), probe_seconds=result.seconds
        )
    return lane, result.seconds
