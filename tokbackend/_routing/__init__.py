"""Routing: which backend answers a tokenizer's calls; the only place that knows `auto`.

`build_routing` builds the named backend's lane or lets `auto` choose one: a `Routing`, or `NoExactBackend`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokbackend._routing.lanes import NoExactBackend, Routing, Shortfall, probed_lane
from tokbackend._routing.names import AUTO, backend_choices

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._probe import PiecesOf
    from tokbackend._reference import Reference


def build_routing(
    reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str, pieces_of: PiecesOf
) -> tuple[Routing, float]:
    """(the routing for `options.backend`, seconds spent probing texts handed over as `pieces_of`
    says); raises NoExactBackend."""
    if options.backend == AUTO:
        from tokbackend._routing.auto import choose_routing

        return choose_routing(reference, tokenizer_json, options, model, pieces_of)
    lane, seconds = probed_lane(options.backend, tokenizer_json, options, reference, model, pieces_of)
    return Routing(lane, "named explicitly"), seconds


__all__ = ["AUTO", "NoExactBackend", "Routing", "Shortfall", "backend_choices", "build_routing"]
