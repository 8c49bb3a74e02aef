"""`backend="auto"`: per model, the first backend in auto's order that is exact for it.

Candidates are every registered backend but the reference ("hf"), by `auto_preference` (lower
first, then by name); one qualifies if it loads, has a Unicode guard and passes the boot probe.
Nothing is built that will not serve. The choice is remembered on disk (`choices`), so the
other processes of a server try it first; it and the candidates passed over are the routing's
`reason`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tokbackend._routing.choices as choices
from tokbackend._routing.lanes import NoExactBackend, Routing, Shortfall, probed_lane
from tokbackend.backends import available_backends, backend_class, versioned_libraries

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._probe import PiecesOf
    from tokbackend._reference import Reference

DEFAULT_PREFERENCE = 50


def candidates() -> list[str]:
    """Registered backends other than the reference, in auto's order. One whose module cannot
    be imported stays a candidate: qualifying it says why it cannot serve."""
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


def choose_routing(
    reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str, pieces_of: PiecesOf
) -> tuple[Routing, float]:
    """(the routing of the first candidate that qualifies, seconds spent probing); raises
    NoExactBackend when no candidate is exact for this model."""
    order = candidates()
    key = choices.choice_key(tokenizer_json, order, versioned_libraries(order))
    remembered = choices.remembered(key)
    if remembered is not None and remembered in order:
        order = [remembered, *(name for name in order if name != remembered)]
    rejected: dict[str, str] = {}
    probe_seconds = 0.0
    for name in order:
        try:
            lane, seconds = probed_lane(name, tokenizer_json, options, reference, model, pieces_of)
        except NoExactBackend as error:
            rejected[name] = error.reason
            probe_seconds += error.probe_seconds
            continue
        except ImportError as error:  # a registered backend's module: it cannot serve either
            rejected[name] = f"{type(error).__name__}: {error}"
            continue
        probe_seconds += seconds
        if name != remembered:
            choices.remember(key, name)
        passed_over = "".join(f"; {other} not exact here ({why})" for other, why in rejected.items())
        how = f"the first in auto's order that is exact ({', '.join(candidates())})"
        if name == remembered:  # a choice another process may have made minutes ago: say what it is
            how = choices.described(key)
        untried = [other for other in order if other != name and other not in rejected]
        reason = f"{how}{passed_over}" + (f"; not built: {', '.join(untried)}" if untried else "")
        return Routing(lane, reason), probe_seconds
    detail = "; ".join(f"{name}: {why}" for name, why in rejected.items()) or "no candidate backends are registered"
    raise NoExactBackend(Shortfall.NO_CANDIDATE, f"no backend is exact for {model} ({detail})")
