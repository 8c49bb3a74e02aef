"""The one shape in which routing says "no backend can serve this tokenizer exactly"."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokbackend._routing.lanes import Routing


class Shortfall(str, enum.Enum):
    """Why no routing was made; `AccelerationState` turns each into raising or serving with HF."""

    UNAVAILABLE = "unavailable"  # the named backend cannot load the tokenizer
    INEXACT = "inexact"  # it loads, but its guard is refused or the boot probe found a mismatch
    NO_CANDIDATE = "no_candidate"  # auto: no candidate both loads and is exact


class NoExactBackend(Exception):
    """Raised by routing; `reason` is what `stats()["disabled_reason"]` shows, `strict_message`
    what `FastPathError` says with strict=True. `routing` and `probe_seconds`: what was built and
    probed before the shortfall was found (shown in stats), where anything was."""

    def __init__(
        self,
        shortfall: Shortfall,
        reason: str,
        strict_message: str | None = None,
        routing: Routing | None = None,
        probe_seconds: float = 0.0,
    ) -> None:
        super().__init__(reason)
        self.shortfall = shortfall
        self.reason = reason
        self.strict_message = strict_message or f"tokbackend: {reason} (strict=True)"
        self.routing = routing
        self.probe_seconds = probe_seconds
