"""A backend named explicitly ("gigatoken", "fastokens", ...): one lane for every call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokbackend._guard import GuardUnavailableError
from tokbackend._probe import probe_lane
from tokbackend._routing.failure import NoExactBackend, Shortfall
from tokbackend._routing.lanes import Routing, build_lane
from tokbackend.backends import BackendUnavailableError

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._reference import Reference


def named_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """(the routing, seconds spent probing); raises NoExactBackend."""
    try:
        lane = build_lane(options.backend, tokenizer_json, options, reference=reference)
    except BackendUnavailableError as error:
        raise NoExactBackend(Shortfall.UNAVAILABLE, str(error)) from error
    except GuardUnavailableError as error:
        raise NoExactBackend(Shortfall.INEXACT, str(error), strict_message=f"tokbackend: {model}: {error}") from error
    routing = Routing(lane, "named explicitly")
    if not options.probe:
        return routing, 0.0
    mismatch, seconds = probe_lane(lane, reference, model)
    if mismatch is not None:
        raise _inexact(routing, f"probe mismatch: {mismatch}", seconds)
    return routing, seconds


def _inexact(routing: Routing, why: str, seconds: float) -> NoExactBackend:
    """`why`: the boot probe's mismatch."""
    return NoExactBackend(
        Shortfall.INEXACT,
        why,
        strict_message=f"tokbackend: {why} (strict=True)",
        routing=routing,
        probe_seconds=seconds,
    )
