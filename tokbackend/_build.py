"""One build of the fast path for a tokenizer's current state, made in one go and never changed.

A rebuild makes a new `Build` and the state swaps it in with one assignment, so a call never sees
half of two builds. A build is unbuilt (`UNBUILT`), final (the fast path serves) or off (HF serves).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Hashable
from typing import Literal

from tokbackend._added_tokens import AddedTokens
from tokbackend._errors import TokbackendError
from tokbackend._options import AccelerationOptions
from tokbackend._probe import PiecesOf
from tokbackend._reference import Reference
from tokbackend._routing import NoExactBackend, Routing, Shortfall, build_routing
from tokbackend._segments import Segments, segments_for
from tokbackend.backends import BackendUnavailableError
from tokbackend.backends._base import PanicConverter

logger = logging.getLogger("tokbackend")


class FastPathError(TokbackendError, RuntimeError):
    """`strict=True` and the backend disagreed with HuggingFace during the boot probe."""


Affixes = tuple[list[int], list[int]]
UNBUILT_REASON = "not built yet"


@dataclasses.dataclass(frozen=True)
class Build:
    """What the fast path serves with; see the module docstring."""

    content: Hashable | None
    routing: Routing | None = None
    disabled_reason: str | None = UNBUILT_REASON
    probe_seconds: float = 0.0
    affixes: Affixes | None = None
    # special tokens the post-processor adds to one sequence (HF checks `stride` against
    # max_length less these, whether or not the call adds them)
    special_tokens: int = 0
    segments: Segments | None = None
    segments_unsupported: str | None = None  # why this tokenizer does not use the segment cache
    # where texts cannot be split here: true of a text that may hold an added token, which HF answers
    added_tokens_to_hf: Callable[[str], object] | None = None
    # how a text reaches the backend (`_pieces_of`), for whoever probes this build again (verify)
    pieces_of: PiecesOf = dataclasses.field(default=lambda text: [text], compare=False, repr=False)
    # a result's Encodings asked for after the tokenizer changed are those of this state
    tokenizer_json: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def phase(self) -> Literal["unbuilt", "final", "off"]:
        """The phase: "unbuilt", "final" (the fast path serves) or "off" (HF serves every call)."""
        if self.content is None and self.disabled_reason == UNBUILT_REASON:
            return "unbuilt"
        return "final" if self.disabled_reason is None else "off"


UNBUILT = Build(content=None)


def build_for(reference: Reference, options: AccelerationOptions, content: Hashable, changed: bool = False) -> Build:
    """A build for the reference's current state; with `changed`, a backend that cannot serve
    turns the fast path off instead of raising (strict=True still raises on inexactness)."""
    tokenizer_json = reference.tokenizer_json()
    model = reference.model
    segments, unsupported, added_tokens_to_hf = None, None, None
    tokens = AddedTokens.from_tokenizer_json(tokenizer_json)
    # the segments split texts for the cache, and where no backend's own pass splits as HF does
    if options.segment_cache_mib is not None or not tokens.one_pass:
        found = segments_for(
            tokenizer_json, options.segment_cache_mib, options.segment_cache_steps_aside, reference.hf_ids
        )
        if isinstance(found, str):
            unsupported = found
            if options.segment_cache_mib is not None:
                logger.info("%s: segment cache off: %s", model, found)
            if not tokens.one_pass:  # its pieces cannot be encoded apart, and no backend splits as HF does
                added_tokens_to_hf = tokens.search
        else:
            segments = found
    common = Build(
        content=content,
        affixes=special_token_affixes(reference),
        special_tokens=reference.special_tokens_count(),
        segments=segments,
        segments_unsupported=unsupported,
        added_tokens_to_hf=added_tokens_to_hf,
        pieces_of=_pieces_of(tokens, segments is not None),
        tokenizer_json=tokenizer_json,
    )
    from tokbackend._metrics import METRICS  # not with the package: see its docstring

    try:
        routing, probe_seconds = build_routing(reference, tokenizer_json, options, model, common.pieces_of)
    except NoExactBackend as failure:
        if METRICS is not None:  # before `_unserved`, which may raise
            METRICS.count_build(options.backend, failure.shortfall.value)
        return dataclasses.replace(
            common,
            routing=failure.routing,
            probe_seconds=failure.probe_seconds,
            disabled_reason=_unserved(failure, options, model, changed),
        )
    _prepare(routing)
    if METRICS is not None:
        METRICS.count_build(routing.lane.name, "served")
    return dataclasses.replace(common, routing=routing, disabled_reason=None, probe_seconds=probe_seconds)


def _pieces_of(tokens: AddedTokens, splits: bool) -> PiecesOf:
    """How a build hands a text to its backend: whole, in pieces split here where they encode
    apart (`splits`), or not at all."""
    if tokens.one_pass:
        return lambda text: [text]
    if not splits:
        return lambda text: None if tokens.may_hold_token(text) else [text]
    return lambda text: tokens.for_backend(text) if tokens.may_hold_token(text) else [text]


def _prepare(routing: Routing) -> None:
    """The serving lane's warm-up, while the build is made; a warm-up that fails costs only speed."""
    lane = routing.lane
    try:
        with PanicConverter(lane.name, "preparing"):
            lane.backend.prepare()
    except Exception as error:  # a panic too: converted above
        logger.warning("backend %s: preparing it failed (%s); it serves unprepared", lane.name, error)


def _unserved(failure: NoExactBackend, options: AccelerationOptions, model: str, changed: bool) -> str:
    """Raise, or log and return why the fast path is off (allow_hf_fallback, `changed`, strict=True
    decide which)."""
    unavailable = failure.shortfall is Shortfall.UNAVAILABLE or (
        failure.shortfall is Shortfall.NO_CANDIDATE and not options.strict
    )
    if unavailable:
        message = f"backend {options.backend!r} cannot serve {model}: {failure.reason}"
        if changed:
            logger.error("%s, since the tokenizer changed after accelerate(); serving it with HuggingFace", message)
            return f"backend unavailable after a change to the tokenizer: {failure.reason}"
        if not options.allow_hf_fallback:
            raise BackendUnavailableError(
                f"tokbackend: {message} (pass allow_hf_fallback=True to serve it with HuggingFace instead)"
            ) from failure
        logger.error("%s; serving with HuggingFace because allow_hf_fallback=True", message)
        return f"backend unavailable: {failure.reason}"
    if options.strict:
        raise FastPathError(failure.strict_message) from failure
    logger.error("%s: %s; the fast path is off and every encode goes to HuggingFace", model, failure.reason)
    return failure.reason


def special_token_affixes(reference: Reference) -> Affixes | None:
    """The ids HF's post-processor puts before and after one sequence, derived by asking HF
    itself on probe texts; None when its effect is not a fixed prefix/suffix."""
    probes = ["tokbackend probe", "x"]
    with_special = reference.hf_ids(probes, add_special_tokens=True)
    without = reference.hf_ids(probes, add_special_tokens=False)
    affixes = None
    for full, bare in zip(with_special, without):
        for start in range(len(full) - len(bare) + 1):
            if full[start : start + len(bare)] == bare:
                found = (full[:start], full[start + len(bare) :])
                break
        else:
            return None
        if affixes is not None and found != affixes:
            return None
        affixes = found
    return affixes
