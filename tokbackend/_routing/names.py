"""The names `backend=` takes: "auto" (routing's choice among backends) and each registered
backend. A module of its own, below everything else in `routing`, so that `tokbackend._options`,
which every routing reads, can check a name without importing what reads it."""

from __future__ import annotations

from tokbackend.backends import available_backends, backend_class, reserve_name

AUTO = "auto"
reserve_name(AUTO, "the per-model choice among backends (tokbackend._routing.auto)")


def backend_choices() -> list[str]:
    """Every value `backend=` takes: "auto" and each registered backend."""
    return [AUTO, *available_backends()]


def check_backend_name(name: str) -> None:
    """ValueError listing the known names, for a name that is neither "auto" nor registered."""
    if name != AUTO:
        backend_class(name)
