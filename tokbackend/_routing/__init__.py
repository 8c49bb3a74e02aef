"""Routing: which backend answers a tokenizer's calls.

The only place that knows `auto` (a choice among backends, not a backend): `build_routing`
builds the named backend's lane (`named`) or lets `auto` choose among every registered backend
but the reference (`auto`, with choices remembered on disk by `choices`). Either way the result
is a `Routing` of `Lane`s, or `NoExactBackend`, the one shape of "no backend can serve this
tokenizer exactly".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokbackend._routing.failure import NoExactBackend, Shortfall
from tokbackend._routing.lanes import FEW_TEXTS, Lane, Routing, build_lane
from tokbackend._routing.names import AUTO, backend_choices, check_backend_name

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._reference import Reference


def build_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
    """(the routing for `options.backend`, seconds spent probing); raises NoExactBackend."""
    if options.backend == AUTO:
        from tokbackend._routing.auto import choose_routing

        return choose_routing(reference, tokenizer_json, options, model)
    from tokbackend._routing.named import named_routing

    return named_routing(reference, tokenizer_json, options, model)


__all__ = [
    "AUTO",
    "FEW_TEXTS",
    "Lane",
    "NoExactBackend",
    "Routing",
    "Shortfall",
    "backend_choices",
    "build_lane",
    "build_routing",
    "check_backend_name",
]
