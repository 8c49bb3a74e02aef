"""`backend="auto"`: per model, the first backend in auto's order that is exact for it.

Every registered backend but the reference (`is_reference`: "hf") is a candidate, tried in the
order of its `auto_preference` (lower first; then by name). A candidate qualifies if it loads
the tokenizer, has a Unicode guard for its pipeline (a shipped or baked record, or one derived
in seconds) and passes the boot probe; the first that qualifies answers every call. Nothing
is built that will not serve: a start builds one backend, or more only where the earlier ones
cannot serve this model, or, with an early start (`early_start`), the one
cheapest to load (`load_cost`: gigatoken), which serves while auto's choice loads and qualifies
on a background thread, and is dropped once the choice is swapped in. The order is measured, not guessed: fastokens first
(its memory stays bounded without renewals, it releases the GIL while it encodes, and it was
the faster on 2 and on 16 cores in every run of `bench/backends.py`), gigatoken second.

The choice is remembered on disk per model and library versions (`tokbackend.routing.choices`),
so the other processes of a server try the chosen backend first and build nothing else. The
choice and the candidates passed over are the routing's `reason` (in `stats()` and the start-up
log line).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING

from tokbackend.backends import available_backends, backend_class, versioned_libraries
from tokbackend.backends.base import BackendUnavailableError
from tokbackend.guard import GuardUnavailableError
from tokbackend.probe import probe_lane
from tokbackend.routing import choices
from tokbackend.routing.failure import NoExactBackend, Shortfall
from tokbackend.routing.lanes import Lane, Routing, build_lane, finish_lane, finished_routing

if TYPE_CHECKING:
    from tokbackend.options import AccelerationOptions
    from tokbackend.reference import Reference

logger = logging.getLogger("tokbackend")

# Where a backend that declares no `auto_preference` comes in auto's order.
DEFAULT_PREFERENCE = 50
# The relative load time of a backend that declares no `load_cost`.
DEFAULT_LOAD_COST = 10


def candidates() -> list[str]:
    """Registered backends other than the reference (`is_reference`), in auto's order. A
    backend whose module cannot be imported stays a candidate: qualifying it says why it
    cannot serve."""
    ranked = []
    for name in available_backends():
        try:
            kind = backend_class(name)
        except ImportError:
            ranked.append((DEFAULT_PREFERENCE, name))
            continue
        if not getattr(kind, "is_reference", False):
            ranked.append((getattr(kind, "auto_preference", DEFAULT_PREFERENCE), name))
    return [name for _, name in sorted(ranked)]


def choose_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """(the routing, seconds spent probing); raises NoExactBackend when no candidate is exact
    for this model. With an early start, the candidate cheapest to load serves while auto's
    choice is made on a background thread (the routing's `upgrade`), where it is not the one
    auto would try first."""
    order = candidates()
    key = choices.choice_key(tokenizer_json, order, versioned_libraries(order))
    remembered = choices.remembered(key)
    if remembered is not None and remembered in order:
        order = [remembered, *(name for name in order if name != remembered)]
    choose = functools.partial(_choose, order, key, remembered, reference, tokenizer_json, options, model)
    bridge = _bridge(order) if options.starts_early else None
    if bridge is not None:
        lane, seconds = _qualify(bridge, reference, tokenizer_json, options, model, early=True)
        if isinstance(lane, Lane):
            first = "auto's remembered choice" if order[0] == remembered else f"first in auto's order ({', '.join(order)})"
            why = f"{bridge} serves while {order[0]}, {first}, loads"
            upgrade = functools.partial(choose, early=False, built={bridge: lane})
            return Routing(lane, why, upgrade, interim=True), seconds
        return choose(early=options.starts_early, built={}, rejected={bridge: lane}, probed=seconds)
    return choose(early=options.starts_early, built={})


def _choose(
    order: list[str],
    key: str,
    remembered: str | None,
    reference: Reference,
    tokenizer_json: str,
    options: AccelerationOptions,
    model: str,
    early: bool,
    built: dict[str, Lane],
    rejected: dict[str, str] | None = None,
    probed: float = 0.0,
) -> tuple[Routing, float]:
    """The first candidate in `order` that qualifies (`built`: lanes already built and probed,
    finished rather than built again; `rejected`: candidates already found wanting)."""
    rejected = dict(rejected or {})
    probe_seconds = probed
    for name in order:
        if name in rejected:
            continue
        if name in built:
            outcome, seconds = finish_lane(built[name], reference, options, model)
        else:
            outcome, seconds = _qualify(name, reference, tokenizer_json, options, model, early)
        probe_seconds += seconds
        if isinstance(outcome, Lane):
            if name != remembered:
                choices.remember(key, name)
            passed_over = "".join(f"; {other} not exact here ({why})" for other, why in rejected.items())
            how = f"the first in auto's order that is exact ({', '.join(candidates())})"
            if name == remembered:  # a choice another process may have made minutes ago: say what it is
                how = choices.described(key)
            untried = [other for other in order if other != name and other not in rejected and other not in built]
            bridged = [other for other in built if other != name]
            reason = (
                f"{how}{passed_over}"
                + (f"; {', '.join(bridged)} served while it loaded" if bridged else "")
                + (f"; not built: {', '.join(untried)}" if untried else "")
            )
            routing = Routing(outcome, reason)
            if outcome.provisional:
                inexact = functools.partial(_inexact, model, name)
                upgrade = functools.partial(finished_routing, routing, reference, options, model, inexact)
                routing = dataclasses.replace(routing, upgrade=upgrade)
            return routing, probe_seconds
        rejected[name] = outcome
    detail = "; ".join(f"{name}: {why}" for name, why in rejected.items()) or "no candidate backends are registered"
    raise NoExactBackend(Shortfall.NO_CANDIDATE, f"no backend is exact for {model} ({detail})")


def _inexact(model: str, name: str, why: str, seconds: float) -> NoExactBackend:
    return NoExactBackend(Shortfall.NO_CANDIDATE, f"no backend is exact for {model} ({name}: {why})")


def _bridge(order: list[str]) -> str | None:
    """The candidate that loads fastest (`load_cost`), where that is not auto's first choice."""
    costs = {}
    for name in order:
        try:
            costs[name] = getattr(backend_class(name), "load_cost", DEFAULT_LOAD_COST)
        except ImportError:
            continue
    if not order or order[0] not in costs:
        return None
    cheapest = min(costs, key=costs.__getitem__)
    return cheapest if costs[cheapest] < costs[order[0]] else None


def _qualify(
    name: str, reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str, early: bool = False
) -> tuple[Lane | str, float]:
    """(the candidate's lane, or why it does not qualify; seconds spent probing)."""
    try:
        lane = build_lane(name, tokenizer_json, options, early=early, reference=reference)
    except (BackendUnavailableError, GuardUnavailableError, ImportError) as error:
        return f"{type(error).__name__}: {error}", 0.0
    if not options.probe:
        return lane, 0.0
    mismatch, seconds = probe_lane(lane, reference, model)
    return (lane if mismatch is None else mismatch), seconds
