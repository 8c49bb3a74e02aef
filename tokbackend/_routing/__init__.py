"""Routing: which backend answers a tokenizer's calls.

The only place that knows `auto` (a choice among backends, not a backend): `build_routing`
builds the named backend's lane or lets `auto` choose among every registered backend but the
reference (with choices remembered on disk by `choices`). Either way the result is a `Routing`
of `Lane`s, or `NoExactBackend`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokbackend._guard import GuardUnavailableError
from tokbackend._routing.lanes import NoExactBackend, Routing, Shortfall, build_lane, probe_lane
from tokbackend._routing.names import AUTO, backend_choices
from tokbackend.backends import BackendUnavailableError

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._reference import Reference


def build_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """(the routing for `options.backend`, seconds spent probing); raises NoExactBackend."""
    if options.backend == AUTO:
        from tokbackend._routing.auto import choose_routing

        return choose_routing(reference, tokenizer_json, options, model)
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
        raise NoExactBackend(Shortfall.INEXACT, f"probe mismatch: {mismatch}", routing=routing, probe_seconds=seconds)
    return routing, seconds


__all__ = ["AUTO", "NoExactBackend", "Routing", "Shortfall", "backend_choices", "build_routing"]
