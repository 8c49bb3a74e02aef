"""A backend named explicitly ("gigatoken", "fastokens", ...): one lane for every call."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from tokbackend.backends import BackendUnavailableError
from tokbackend.guard import GuardUnavailableError
from tokbackend.probe import probe_lane
from tokbackend.routing.failure import NoExactBackend, Shortfall
from tokbackend.routing.lanes import Lane, Routing, build_lane, finish_lane

if TYPE_CHECKING:
    from tokbackend.options import AccelerationOptions
    from tokbackend.reference import Reference


def named_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """(the routing, seconds spent probing); raises NoExactBackend."""
    try:
        lane = build_lane(options.backend, tokenizer_json, options, early=options.starts_early)
    except BackendUnavailableError as error:
        raise NoExactBackend(Shortfall.UNAVAILABLE, str(error)) from error
    except GuardUnavailableError as error:
        raise NoExactBackend(Shortfall.INEXACT, str(error), strict_message=f"tokbackend: {model}: {error}") from error
    upgrade = functools.partial(_finished, lane, reference, options, model) if lane.provisional else None
    routing = Routing(lane, lane, "named explicitly", upgrade)
    if not options.probe:
        return routing, 0.0
    mismatch, seconds = probe_lane(lane, reference, model)
    if mismatch is not None:
        raise _inexact(mismatch, routing, seconds)
    return routing, seconds


def _finished(lane: Lane, reference: Reference, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """The routing once the lane's provisional guard is exact (the upgrade of an early start)."""
    final, seconds = finish_lane(lane, reference, options, model)
    if isinstance(final, str):
        raise _inexact(final, Routing(lane, lane, "named explicitly"), seconds)
    return Routing(final, final, "named explicitly"), seconds


def _inexact(mismatch: str, routing: Routing, seconds: float) -> NoExactBackend:
    return NoExactBackend(
        Shortfall.INEXACT,
        f"probe mismatch: {mismatch}",
        strict_message=f"tokbackend: {mismatch} (strict=True)",
        routing=routing,
        probe_seconds=seconds,
    )
