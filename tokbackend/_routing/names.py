"""The names `backend=` takes: "auto" (routing's choice among backends) and each registered
backend, and the values a server flag takes for them ("gigatoken", "tokbackend-NAME": the prefix
keeps them apart from the servers' own "fastokens"). A module of its own, below everything else in
`routing`, so that `tokbackend._options`, which every routing reads, can check a name without
importing what reads it, and the gates and the server plugins read the flags from one place."""

from __future__ import annotations

from tokbackend.backends import BARE_FLAG_BACKENDS, available_backends, backend_class, reserve_name

AUTO = "auto"
reserve_name(AUTO, "the per-model choice among backends (tokbackend._routing.auto)")


def backend_choices() -> list[str]:
    """Every value `backend=` takes: "auto" and each registered backend."""
    return [AUTO, *available_backends()]


def check_backend_name(name: str) -> None:
    """ValueError listing the known names, for a name that is neither "auto" nor registered."""
    if name != AUTO:
        backend_class(name)


FLAG_PREFIX = "tokbackend-"
# The value a server flag defaults to in our own helpers (`accelerate_for_sglang`).
DEFAULT_FLAG_VALUE = BARE_FLAG_BACKENDS[0]


def flag_values() -> list[str]:
    """Every value a server flag accepts for tokbackend: "gigatoken", "tokbackend-auto", ..."""
    return [*BARE_FLAG_BACKENDS, *(FLAG_PREFIX + name for name in backend_choices())]


def backend_for_flag(value: object) -> str | None:
    """The tokbackend backend a flag value selects, or None when the value is not ours."""
    if isinstance(value, str) and value in flag_values():
        return value.removeprefix(FLAG_PREFIX)  # a bare value ("gigatoken") has no prefix to remove
    return None
