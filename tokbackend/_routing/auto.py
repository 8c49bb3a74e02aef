"""`backend="auto"`: per model, the first backend in auto's order that is exact for it.

Candidates are every registered backend but the reference ("hf"), by `auto_preference` (lower
first, then by name); one qualifies if it loads, has a Unicode guard and passes the boot probe.
Nothing is built that will not serve. The choice is remembered on disk (`choices`), so the
other processes of a server try it first; it and the candidates passed over are the routing's
`reason`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tokbackend._guard import GuardUnavailableError
from tokbackend._routing import choices
from tokbackend._routing.lanes import Lane, NoExactBackend, Routing, Shortfall, build_lane, probe_lane
from tokbackend.backends import available_backends, backend_class, versioned_libraries
from tokbackend.backends._base import BackendUnavailableError

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._reference import Reference

logger = logging.getLogger("tokbackend")

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


def choose_routing(reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str) -> tuple[Routing, float]:
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
        outcome, seconds = _qualify(name, reference, tokenizer_json, options, model)
        probe_seconds += seconds
        if isinstance(outcome, Lane):
            if name != remembered:
                choices.remember(key, name)
            passed_over = "".join(f"; {other} not exact here ({why})" for other, why in rejected.items())
            how = f"the first in auto's order that is exact ({', '.join(candidates())})"
            if name == remembered:  # a choice another process may have made minutes ago: say what it is
                how = choices.described(key)
            untried = [other for other in order if other != name and other not in rejected]
            reason = f"{how}{passed_over}" + (f"; not built: {', '.join(untried)}" if untried else "")
            return Routing(outcome, reason), probe_seconds
        rejected[name] = outcome
    detail = "; ".join(f"{name}: {why}" for name, why in rejected.items()) or "no candidate backends are registered"
    raise NoExactBackend(Shortfall.NO_CANDIDATE, f"no backend is exact for {model} ({detail})")


def _qualify(
    name: str, reference: Reference, tokenizer_json: str, options: AccelerationOptions, model: str
) -> tuple[Lane | str, float]:
    """(the candidate's lane, or why it does not qualify; seconds spent probing)."""
    try:
        lane = build_lane(name, tokenizer_json, options, reference=reference)
    except (BackendUnavailableError, GuardUnavailableError, ImportError) as error:
        return f"{type(error).__name__}: {error}", 0.0
    if not options.probe:
        return lane, 0.0
    mismatch, seconds = probe_lane(lane, reference, model)
    return (lane if mismatch is None else mismatch), seconds
