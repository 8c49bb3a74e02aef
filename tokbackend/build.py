"""One build of the fast path for a tokenizer's current state, made in one go and never changed.

A `Build` holds everything `AccelerationState.answer` reads: the routing (or why the fast path
is off), the special-token affixes, the segment cache, and the content of the tokenizer state it
was built for (`Reference.content`). A rebuild makes a new one and the state swaps it in with one
assignment, so a call never sees half of one build and half of another.

A build is in one of the phases of `Phase` (`Build.phase`, `stats()["start_up"]["phase"]`);
`PHASES` says, for each, who answers and which phases may replace it, and docs/start-up.md
holds the table `lifecycle_table()` makes of it (a test checks the two agree). A state swaps a
build in only through `AccelerationState._swap`, which checks the step against `PHASES`.

- An early build's `next` (`tokbackend.successors.Successor`) runs `upgraded` on the one
  process-wide executor thread, once the calls of every state serving the build pause; that
  worker swaps the result into each of them, and a call or `wait_until_final` that finds it
  done swaps it in too (only where the build still serves).
- A copy of the tokenizer (copy, deepcopy) shares the build and so its `next`: one `upgraded`
  per process, whichever copy asks first. An unpickled one makes a build of its own, in this
  process as in another.
- A fork: the child serves the build it inherited; a `next` not finished at the fork is pending
  again there (the worker stayed in the parent), and the child's first call on the build, or
  `wait_until_final`, runs it on an executor of its own.
- A change to the tokenizer (`Reference.content`): a new build for the new state replaces this
  one, whatever its state; an `upgraded` that ends after it is dropped.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
from collections.abc import Hashable

from tokbackend.backends import BackendUnavailableError
from tokbackend.backends.base import is_error, panics_as_errors
from tokbackend.backends.exiting import exiting, watch_exit
from tokbackend.options import AccelerationOptions
from tokbackend.reference import Reference
from tokbackend.routing import NoExactBackend, Routing, Shortfall, build_routing
from tokbackend.segments import Segments, segments_for
from tokbackend.successors import Successor

logger = logging.getLogger("tokbackend")


class FastPathError(RuntimeError):
    """`strict=True` and the backend disagreed with HuggingFace during the boot probe."""


Affixes = tuple[list[int], list[int]]


UNBUILT_REASON = "not built yet"


class Phase(str, enum.Enum):
    """Where a build stands in the start-up (see `PHASES`)."""

    UNBUILT = "unbuilt"
    EARLY = "early"
    FINAL = "final"
    FAILED = "failed"
    OFF = "off"


@dataclasses.dataclass(frozen=True)
class PhaseRule:
    made_by: str
    who_answers: str
    followed_by: tuple[Phase, ...]  # phases whose build may replace it (a change to the tokenizer aside)


# Every phase, who answers in it and what may replace it: the one table of the lifecycle. Any
# build may also be replaced by a new build for a changed tokenizer (`AccelerationState.rebuild`).
PHASES: dict[Phase, PhaseRule] = {
    Phase.UNBUILT: PhaseRule("the state, before `accelerate()` builds", "nobody: `accelerate()` builds first", (Phase.EARLY, Phase.FINAL, Phase.OFF)),
    Phase.EARLY: PhaseRule(
        "`build_for` with an early start (`AccelerationOptions.early_start`)",
        "the early routing: texts its provisional guard holds go to HF, the rest to the backend (for `auto`, the cheapest to load while its choice loads)",
        (Phase.FINAL, Phase.FAILED),
    ),
    Phase.FINAL: PhaseRule("`build_for`, or `upgraded` after an early start", "the routing: texts its exact guard holds go to HF, the rest to the backend", ()),
    Phase.FAILED: PhaseRule(
        "`upgraded`: finishing an early start found no exact backend, or an error or a Rust panic",
        "HF, every call; an ERROR logged, `stats()[\"start_up\"][\"failed\"]` says why, `tokbackend verify` exits 6",
        (),
    ),
    Phase.OFF: PhaseRule("`build_for`: no backend is exact (or none loads, with `allow_hf_fallback`)", "HF, every call", ()),
}


def lifecycle_table() -> str:
    """`PHASES` as the markdown table docs/start-up.md holds."""
    rows = ["| phase | made by | who answers | what may replace it |", "|---|---|---|---|"]
    for phase, rule in PHASES.items():
        follows = ", ".join(f"`{after.value}`" for after in rule.followed_by) or "nothing"
        rows.append(f"| `{phase.value}` | {rule.made_by} | {rule.who_answers} | {follows} |")
    return "\n".join(rows) + "\n"


@dataclasses.dataclass(frozen=True)
class Build:
    """What the fast path serves with; see the module docstring."""

    content: Hashable | None
    routing: Routing | None = None
    disabled_reason: str | None = UNBUILT_REASON
    probe_seconds: float = 0.0
    # the ids HF's post-processor puts around one sequence; None: not a fixed prefix/suffix
    affixes: Affixes | None = None
    # special tokens the post-processor adds to one sequence (HF checks `stride` against
    # max_length less these, whether or not the call adds them)
    special_tokens: int = 0
    segments: Segments | None = None
    segments_unsupported: str | None = None  # why this tokenizer does not use the segment cache
    # what it was built from: a result's Encodings asked for after the tokenizer changed are
    # those of this state (`tokbackend.tokenizer`)
    tokenizer_json: str | None = dataclasses.field(default=None, compare=False, repr=False)
    # the lanes' `prepare()` (warm-ups, spares), on a background thread once they serve
    preparing: threading.Thread | None = dataclasses.field(default=None, compare=False)
    # why finishing an early start failed (`upgraded`): the fast path is then off
    failed: str | None = dataclasses.field(default=None, compare=False)
    # an early start's: the final (or failed) build, made once per process, for every state
    # serving this one (`tokbackend.successors`); None when final
    next: Successor | None = dataclasses.field(default=None, compare=False, repr=False)
    # whether nothing is left to swap in (an early start's build is not, `upgraded`); read on
    # every call, so set once here
    final: bool = dataclasses.field(init=False, compare=False)

    @property
    def phase(self) -> Phase:
        if self.content is None and self.disabled_reason == UNBUILT_REASON:
            return Phase.UNBUILT
        if self.failed is not None:
            return Phase.FAILED
        if self.disabled_reason is not None:
            return Phase.OFF
        return Phase.FINAL if self.final else Phase.EARLY

    def __post_init__(self) -> None:
        final = self.routing is None or self.routing.upgrade is None or self.disabled_reason is not None
        object.__setattr__(self, "final", final)
        if final:
            object.__setattr__(self, "next", None)  # a replace() of an early build: nothing follows
        elif self.next is None:
            raise ValueError("a build that is not final needs the Successor that finishes it (`next`)")


UNBUILT = Build(content=None)


def build_for(reference: Reference, options: AccelerationOptions, content: Hashable, changed: bool = False) -> Build:
    """A build for the reference's current state, whose `content` the caller has read. Raises
    BackendUnavailableError (unless allow_hf_fallback) and FastPathError (strict=True) as
    `AccelerationOptions` documents. `changed`: the tokenizer changed after `accelerate()` and
    this build is made during an encode call, which a backend that cannot serve the new state
    must not fail: it is logged and the fast path turned off (strict=True still raises)."""
    tokenizer_json = reference.tokenizer_json()
    model = reference.model
    segments, unsupported = None, None
    if options.segment_cache_mib is not None:
        found = segments_for(tokenizer_json, options.segment_cache_mib, options.segment_cache_steps_aside, reference.hf_ids)
        if isinstance(found, str):
            unsupported = found
            logger.info("%s: segment cache off: %s", model, found)
        else:
            segments = found
    common = {
        "content": content,
        "affixes": special_token_affixes(reference),
        "special_tokens": reference.special_tokens_count(),
        "segments": segments,
        "segments_unsupported": unsupported,
        "tokenizer_json": tokenizer_json,
    }
    try:
        routing, probe_seconds = build_routing(reference, tokenizer_json, options, model)
    except NoExactBackend as failure:
        return Build(
            **common,
            routing=failure.routing,
            probe_seconds=failure.probe_seconds,
            disabled_reason=_unserved(failure, options, model, changed),
        )
    preparing = None if routing.interim else _prepare(routing)
    successor = None if routing.upgrade is None else Successor(lambda successor: _finished(build, options, model))
    served = {"routing": routing, "disabled_reason": None, "probe_seconds": probe_seconds, "preparing": preparing}
    build = Build(**common, **served, next=successor)
    if successor is not None:
        successor.start()
    return build


def _finished(build: Build, options: AccelerationOptions, model: str) -> Build:
    """`build.next`'s work, on the executor thread: `upgraded` once the calls pause; the build
    itself, unfinished, where the process exits first (nothing would serve with it)."""
    build.next.wait_for_a_pause(stop=exiting)
    if exiting():
        return build
    return upgraded(build, options, model)


def upgraded(build: Build, options: AccelerationOptions, model: str) -> Build:
    """The final build after an early start (`Routing.upgrade`; run on a background thread,
    never raising): the upgraded routing, or, where the upgrade found no exact backend or
    failed, the fast path off with the reason in `failed` (logged as an ERROR): HuggingFace
    answers every call from then on, `stats()["start_up"]["failed"]` says why and `tokbackend
    verify` exits non-zero. Never the early build served on: its guard was provisional and its
    backend probed without the texts that guard held."""
    try:
        routing, probe_seconds = build.routing.upgrade()
    except NoExactBackend as failure:
        reason = _unserved(failure, options, model, changed=False, upgrading=True)
        return _failed(build, failure.routing or dataclasses.replace(build.routing, upgrade=None), reason)
    except BaseException as error:  # noqa: BLE001 - a background thread must not die silently
        if not is_error(error):
            raise
        reason = f"finishing the start-up build failed: {type(error).__name__}: {error}"
        logger.error("%s: %s; every encode now goes to HuggingFace", model, reason)
        return _failed(build, dataclasses.replace(build.routing, upgrade=None, interim=False), reason)
    prepared = {id(build.routing.lane.backend)} if build.preparing is not None else set()
    return dataclasses.replace(
        build,
        routing=routing,
        probe_seconds=build.probe_seconds + probe_seconds,
        preparing=_prepare(routing, skip=prepared),
        next=None,
    )


def _failed(build: Build, routing: Routing, reason: str) -> Build:
    return dataclasses.replace(build, routing=routing, disabled_reason=reason, failed=reason, next=None)


def _prepare(routing: Routing, skip: set[int] = frozenset()) -> threading.Thread:
    """Start the lanes' `prepare()` on a thread of its own: it makes the first calls fast and
    may take a second or pause the GIL, which start-up does not wait for. Not a daemon: an
    interpreter that exits meanwhile waits for it (a daemon thread still inside a backend's
    native code when the interpreter finalizes aborts the process), and it stops between its
    steps once the interpreter exits (`tokbackend.backends.exiting`)."""

    def prepare() -> None:
        lane = routing.lane
        if id(lane.backend) in skip or exiting():  # prepared for the build this one replaces, or
            return  # the process exits and nothing will use it (`tokbackend.backends.exiting`)
        try:
            with panics_as_errors(lane.name, "preparing"):
                lane.backend.prepare()
        except Exception as error:  # a warm-up that fails (or panics) costs only speed
            logger.warning("backend %s: preparing it failed (%s); it serves unprepared", lane.name, error)

    watch_exit()
    thread = threading.Thread(target=prepare, name="tokbackend-prepare")
    thread.start()
    return thread


def _unserved(failure: NoExactBackend, options: AccelerationOptions, model: str, changed: bool, upgrading: bool = False) -> str:
    """Raise, or log and return the reason the fast path is off, for a routing that could not be
    made: a backend that cannot load (or no exact candidate of "auto") raises unless
    allow_hf_fallback or the tokenizer `changed` during serving; an inexact one is turned off;
    strict=True raises for inexactness. `upgrading`: found after an early start had served (on
    a background thread, where nothing can be raised to the caller)."""
    unavailable = failure.shortfall is Shortfall.UNAVAILABLE or (
        failure.shortfall is Shortfall.NO_CANDIDATE and not options.strict
    )
    if upgrading:
        logger.error("%s: %s, found finishing the start-up build; every encode now goes to HuggingFace", model, failure.reason)
        return failure.reason
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
