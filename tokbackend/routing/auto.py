"""`backend="auto"`: per model, the fastest backend that is exact for it, on this host.

Every registered backend but the reference (`is_reference`: "hf") is a candidate. A candidate
counts only if it loads the tokenizer, has a Unicode guard for it and passes the boot probe. The candidates are
then timed on built-in text (one long text, and a batch of texts; guard check included), and
the fastest answers single texts and the fastest batches: they may be different backends. A
backend whose memory stays bounded without renewals (fastokens) is preferred when within 10% of
the fastest, since a renewal pauses the process while a vocabulary loads. The choice and the
timings are the routing's `reason` (in `stats()` and the start-up log line). A choice is kept on
disk per model fingerprint, library versions and core count, so the other processes of a
server, and later starts, build only the chosen backends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import statistics
import time
from typing import TYPE_CHECKING

from tokbackend.backends import available_backends, backend_class
from tokbackend.backends.base import BackendUnavailableError
from tokbackend.backends.warmup import builtin_texts
from tokbackend.guard import GuardUnavailableError
from tokbackend.probe import probe_lane
from tokbackend.routing import choices
from tokbackend.routing.failure import NoExactBackend, Shortfall
from tokbackend.routing.lanes import Lane, Routing, build_lane

if TYPE_CHECKING:
    from tokbackend.options import AccelerationOptions
    from tokbackend.reference import Reference

logger = logging.getLogger("tokbackend")

BATCH_SIZE = 16


def candidates() -> list[str]:
    """Registered backends other than the reference (`is_reference`), in name order. A backend
    whose module cannot be imported stays a candidate: qualifying it says why it cannot serve."""
    return [name for name in available_backends() if not _is_reference(name)]


def _is_reference(name: str) -> bool:
    try:
        return bool(getattr(backend_class(name), "is_reference", False))
    except ImportError:
        return False


def choose_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """(the routing, seconds spent probing); raises NoExactBackend when no candidate is exact
    for this model."""
    key = choices.choice_key(tokenizer_json, candidates(), _libraries())
    remembered = choices.remembered(key)
    names = candidates() if remembered is None else sorted({remembered["single"], remembered["batch"]})
    lanes: dict[str, Lane] = {}
    rejected: dict[str, str] = {}
    probe_seconds = 0.0
    # A candidate without a guard record for the installed versions is passed over rather than
    # derived (minutes); only when no candidate has one are guards derived, as options say.
    unguarded = []
    for name in names:
        outcome, seconds = _qualify(name, reference, tokenizer_json, options.replace(unicode_guard="refuse"), model)
        probe_seconds += seconds
        if isinstance(outcome, Lane):
            lanes[name] = outcome
        elif outcome.startswith(GuardUnavailableError.__name__) and options.unicode_guard == "derive":
            unguarded.append(name)
        else:
            rejected[name] = outcome
    for name in unguarded if not lanes else ():
        outcome, seconds = _qualify(name, reference, tokenizer_json, options, model)
        probe_seconds += seconds
        if isinstance(outcome, Lane):
            lanes[name] = outcome
        else:
            rejected[name] = outcome
    rejected.update({name: "no guard record for the installed versions (passed over)" for name in unguarded if name not in lanes})
    if remembered is not None and set(lanes) == set(names):
        routing = Routing(lanes[remembered["single"]], lanes[remembered["batch"]], remembered["reason"] + " (remembered)")
        return routing, probe_seconds
    if remembered is not None:  # a remembered backend no longer qualifies: choose afresh
        choices.forget(key)
        return choose_routing(reference, tokenizer_json, options, model)
    return _choose(lanes, rejected, key, model), probe_seconds


def _qualify(
    name: str, reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str
) -> tuple[Lane | str, float]:
    """(the candidate's lane, or why it does not qualify; seconds spent probing)."""
    try:
        lane = build_lane(name, tokenizer_json, options)
    except (BackendUnavailableError, GuardUnavailableError, ImportError) as error:
        return f"{type(error).__name__}: {error}", 0.0
    if not options.probe:
        return lane, 0.0
    mismatch, seconds = probe_lane(lane, reference, model)
    return (lane if mismatch is None else mismatch), seconds


def _choose(lanes: dict[str, Lane], rejected: dict[str, str], key: str, model: str) -> Routing:
    if not lanes:
        detail = "; ".join(f"{name}: {why}" for name, why in rejected.items()) or "no candidate backends are registered"
        raise NoExactBackend(Shortfall.NO_CANDIDATE, f"no backend is exact for {model} ({detail})")
    single = {name: _time_single(lane) for name, lane in lanes.items()}
    batch = {name: _time_batch(lane) for name, lane in lanes.items()}
    single_name, batch_name = _fastest(single, lanes), _fastest(batch, lanes)
    reason = (
        f"on {os.cpu_count()} cores: one text "
        + ", ".join(f"{name} {seconds * 1000:.2f} ms" for name, seconds in sorted(single.items(), key=lambda item: item[1]))
        + f"; batch of {BATCH_SIZE} "
        + ", ".join(f"{name} {seconds * 1000:.1f} ms" for name, seconds in sorted(batch.items(), key=lambda item: item[1]))
        + "".join(f"; {name} not exact here ({why})" for name, why in rejected.items())
    )
    choices.remember(key, {"single": single_name, "batch": batch_name, "reason": reason})
    return Routing(lanes[single_name], lanes[batch_name], reason)


# A backend whose memory stays bounded on its own needs no renewals, and a renewal pauses the
# process while a vocabulary loads; within this margin of the fastest, it is preferred.
BOUNDED_MEMORY_MARGIN = 1.10


def _fastest(seconds: dict[str, float], lanes: dict[str, Lane]) -> str:
    fastest = min(seconds, key=seconds.get)
    bounded = [name for name in seconds if not backend_class(lanes[name].name).grows_without_bound]
    if bounded:
        best_bounded = min(bounded, key=seconds.get)
        if seconds[best_bounded] <= seconds[fastest] * BOUNDED_MEMORY_MARGIN:
            return best_bounded
    return fastest


def _time_single(lane: Lane) -> float:
    texts = builtin_texts()
    text = texts[0] + texts[1]  # ~200k characters, about a 50k-token prompt
    lane.backend.encode(text)
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        lane.guard.needs_hf(text)  # what a call through the lane costs, guard included
        lane.backend.encode(text)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def _time_batch(lane: Lane) -> float:
    texts = list(builtin_texts()[2 : 2 + BATCH_SIZE])
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        any(lane.guard.needs_hf(text) for text in texts)
        lane.backend.encode_batch(texts)
        runs.append(time.perf_counter() - started)
    return min(runs)


def _libraries() -> tuple[str, ...]:
    """The libraries whose versions the candidates' timings depend on."""
    libraries: list[str] = []
    for name in candidates():
        with contextlib.suppress(ImportError):
            libraries.extend(backend_class(name).versioned_libraries)
    return tuple(libraries)
