"""Prometheus metrics, where prometheus_client is importable: `METRICS`, else None (docs/metrics.md).

Imported on first use, never with the package: prometheus_client chooses multiprocess mode when it
is imported, and SGLang sets PROMETHEUS_MULTIPROC_DIR after it has imported its plugins.
"""

from __future__ import annotations

import os
from types import ModuleType

from tokbackend._policy import FallbackReason

# from a short text on the fast path to HF on a long batch
ENCODE_SECONDS_BUCKETS = (
    1e-5,
    2.5e-5,
    5e-5,
    1e-4,
    2.5e-4,
    5e-4,
    1e-3,
    2.5e-3,
    5e-3,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)


class Metrics:
    """tokbackend's metrics in prometheus_client's default registry. Each per-call method is a
    labelled child's own `inc` or `observe`, resolved here: a call pays no label lookup."""

    def __init__(self, prometheus_client: ModuleType) -> None:
        counter, histogram = prometheus_client.Counter, prometheus_client.Histogram
        fast = counter("tokbackend_fast_texts", "Texts the backend answered (each text of a batch counts once)")
        fallback = counter("tokbackend_fallback_texts", "Texts handed to HuggingFace, by reason", ["reason"])
        self._builds = counter(
            "tokbackend_builds", "Builds of the fast path, by backend and outcome", ["backend", "outcome"]
        )
        seconds = histogram(
            "tokbackend_encode_seconds",
            "Seconds an encode call took, by who answered it",
            ["path"],
            buckets=ENCODE_SECONDS_BUCKETS,
        )
        self.fast_texts = fast.inc
        # every reason, so each series exists (at 0) from the start, and a rate over it is defined
        self.fallback_texts = {reason: fallback.labels(reason.value).inc for reason in FallbackReason}
        self.fast_seconds = seconds.labels("fast").observe
        self.hf_seconds = seconds.labels("hf").observe

    def count_build(self, backend: str, outcome: str) -> None:
        """Count one build: `outcome` "served" (by `backend`), or why it did not serve."""
        self._builds.labels(backend, outcome).inc()


def _metrics() -> Metrics | None:
    if os.environ.get("TOKBACKEND_METRICS") == "0":  # opted out: no per-call cost
        return None
    try:
        import prometheus_client
    except ImportError:  # without it, nothing is counted or timed for Prometheus
        return None
    return Metrics(prometheus_client)


METRICS = _metrics()
