"""Backend registry: a name ("hf", "gigatoken", "fastokens", ...) maps to a backend class.

Third-party packages add backends through the entry-point group `tokbackend.backends`
(`name = "package.module:Class"`, a class following `BackendClass`); they are read once, under a
lock, and a name already taken is refused loudly rather than silently replaced.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from importlib.metadata import entry_points
from types import MappingProxyType

from tokbackend._process.forking import fork_safe_lock
from tokbackend.backends._base import BackendClass, BackendUnavailableError, EncodeBackend

ENTRY_POINT_GROUP = "tokbackend.backends"

_BUILTIN_FACTORIES = MappingProxyType(
    {
        "hf": "tokbackend.backends._hf:HFBackend",
        "gigatoken": "tokbackend.backends._gigatoken:GigatokenBackend",
        "fastokens": "tokbackend.backends._fastokens:FastokensBackend",
    }
)
BUILTIN_BACKENDS = tuple(_BUILTIN_FACTORIES)

# Backends a server flag may name without tokbackend's "tokbackend-" prefix: the flag users know
# (`--tokenizer-backend gigatoken`), and the backend the integrations default to.
BARE_FLAG_BACKENDS = ("gigatoken",)


class _Registry:
    """The names taken: each backend's class (or its "module:attribute" path), and the names
    reserved for something else; entry points are read once, on first use, under the lock."""

    def __init__(self) -> None:
        self.lock = fork_safe_lock(self, "lock")
        self.factories: dict[str, str | BackendClass] = dict(_BUILTIN_FACTORIES)
        self.reserved: dict[str, str] = {}  # name -> what it is instead of a backend
        self.entry_points_read = False

    def add(self, name: str, factory: str | BackendClass, origin: str) -> None:
        """Take `name` for `factory`; the caller holds the lock."""
        if name in self.reserved:
            raise ValueError(
                f"tokbackend backend name {name!r} is reserved for {self.reserved[name]}; {origin} tried to use it"
            )
        if name in self.factories:
            raise ValueError(f"tokbackend backend {name!r} is already registered; {origin} tried to register it again")
        self.factories[name] = factory

    def all(self) -> dict[str, str | BackendClass]:
        with self.lock:
            if not self.entry_points_read:
                for entry_point in entry_points(group=ENTRY_POINT_GROUP):
                    self.add(entry_point.name, entry_point.value, origin=f"entry point {entry_point.value!r}")
                self.entry_points_read = True
        return self.factories


_registry = _Registry()


def register_backend(name: str, factory: str | BackendClass) -> None:
    """Register `factory` (a backend class, or a "module:attribute" path to one) under `name`.

    >>> register_backend("mine", "my_package.backend:MyBackend")  # doctest: +SKIP
    """
    with _registry.lock:
        _registry.add(name, factory, origin="register_backend()")


def reserve_name(name: str, meaning: str) -> None:
    """Keep `name` from being registered as a backend: it means something else (`meaning`)."""
    with _registry.lock:
        _registry.reserved[name] = meaning


def available_backends() -> list[str]:
    """Names of every registered backend, built-in and from entry points."""
    return sorted(_registry.all())


def backend_class(name: str) -> BackendClass:
    """The class registered under `name`; a clear error lists the known names otherwise."""
    try:
        factory = _registry.all()[name]
    except KeyError:
        raise ValueError(
            f"unknown tokbackend backend {name!r}; registered backends: {', '.join(available_backends())}"
        ) from None
    if isinstance(factory, str):
        module_name, _, attribute = factory.partition(":")
        factory = getattr(import_module(module_name), attribute)
    return factory


def versioned_libraries(names: Iterable[str]) -> tuple[str, ...]:
    """The libraries whose versions decide what the named backends encode, in order and once
    each; a backend whose library does not import names none (it fails, loudly, where it is used).

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
