"""Backend registry: a name ("hf", "gigatoken", "fastokens", ...) maps to a backend class.

Third-party packages add backends through the entry-point group `tokbackend.backends`
(`name = "package.module:Class"`, a class following `BackendClass`); they are discovered once, under a lock, and a name
that is already taken is refused loudly rather than silently replaced.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib import import_module
from importlib.metadata import entry_points

from tokbackend._process.forking import fork_safe_lock
from tokbackend.backends._base import BackendClass, BackendUnavailableError, EncodeBackend

ENTRY_POINT_GROUP = "tokbackend.backends"

_BUILTIN_FACTORIES = {
    "hf": "tokbackend.backends._hf:HFBackend",
    "gigatoken": "tokbackend.backends._gigatoken:GigatokenBackend",
    "fastokens": "tokbackend.backends._fastokens:FastokensBackend",
}
BUILTIN_BACKENDS = tuple(_BUILTIN_FACTORIES)

# Backends a server flag may name without tokbackend's "tokbackend-" prefix: the flag users know
# (`--tokenizer-backend gigatoken`), and the backend the integrations default to.
BARE_FLAG_BACKENDS = ("gigatoken",)

_lock = fork_safe_lock(sys.modules[__name__], "_lock")
_factories: dict[str, str | BackendClass] = dict(_BUILTIN_FACTORIES)
_reserved: dict[str, str] = {}  # name -> what it is instead of a backend
_entry_points_loaded = False


def register_backend(name: str, factory: str | BackendClass) -> None:
    """Register `factory` (a backend class, or a "module:attribute" path to one) under `name`.

    >>> register_backend("mine", "my_package.backend:MyBackend")  # doctest: +SKIP
    """
    with _lock:
        _register_locked(name, factory, origin="register_backend()")


def reserve_name(name: str, meaning: str) -> None:
    """Keep `name` from being registered as a backend: it means something else (`meaning`),
    such as routing's "auto"."""
    with _lock:
        _reserved[name] = meaning


def _register_locked(name: str, factory: str | BackendClass, origin: str) -> None:
    if name in _reserved:
        raise ValueError(f"tokbackend backend name {name!r} is reserved for {_reserved[name]}; {origin} tried to use it")
    if name in _factories:
        raise ValueError(f"tokbackend backend {name!r} is already registered; {origin} tried to register it again")
    _factories[name] = factory


def _load_entry_points() -> None:
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded:
            return
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            _register_locked(entry_point.name, entry_point.value, origin=f"entry point {entry_point.value!r}")
        _entry_points_loaded = True


def available_backends() -> list[str]:
    """Names of every registered backend, built-in and from entry points."""
    _load_entry_points()
    return sorted(_factories)


def backend_class(name: str) -> BackendClass:
    """The class registered under `name`; a clear error lists the known names otherwise."""
    _load_entry_points()
    try:
        factory = _factories[name]
    except KeyError:
        raise ValueError(f"unknown tokbackend backend {name!r}; registered backends: {', '.join(available_backends())}") from None
    if isinstance(factory, str):
        module_name, _, attribute = factory.partition(":")
        factory = getattr(import_module(module_name), attribute)
    return factory


def versioned_libraries(names: Iterable[str]) -> tuple[str, ...]:
    """The libraries whose versions decide what the named backends encode (each class's
    `versioned_libraries`), in order and once each; a backend whose library does not import
    names none (it fails, loudly, where it is used).

    >>> versioned_libraries(["hf", "gigatoken", "fastokens"])
    ('gigatoken', 'fastokens')
    """
    libraries: dict[str, None] = {}
    for name in names:
        try:
            libraries.update(dict.fromkeys(backend_class(name).versioned_libraries))
        except ImportError:
            continue
    return tuple(libraries)


def reference_backend() -> BackendClass:
    """The registered backend that is HuggingFace's own encoder (`is_reference`), for comparisons."""
    for name in available_backends():
        kind = backend_class(name)
        if getattr(kind, "is_reference", False):
            return kind
    raise LookupError("no registered tokbackend backend is marked is_reference")


__all__ = [
    "BARE_FLAG_BACKENDS",
    "BUILTIN_BACKENDS",
    "BackendClass",
    "BackendUnavailableError",
    "EncodeBackend",
    "available_backends",
    "backend_class",
    "reference_backend",
    "register_backend",
    "reserve_name",
    "versioned_libraries",
]
