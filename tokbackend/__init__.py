"""tokbackend: fast, exact plain-text encode for HuggingFace tokenizers in serving stacks.

>>> import tokbackend
>>> tokenizer = tokbackend.load("qwen3.6")            # doctest: +SKIP
>>> fast = tokbackend.accelerate(hf_tokenizer)          # doctest: +SKIP
>>> fast.tokbackend.stats()                             # doctest: +SKIP
"""

from tokbackend.backends import BackendUnavailableError, EncodeBackend, available_backends, register_backend
from tokbackend.build import FastPathError
from tokbackend.loading import DEFAULT_MODEL, ModelNotFoundError, load, load_hf
from tokbackend.options import AccelerationOptions
from tokbackend.policy import FallbackReason
from tokbackend.state import AccelerationState
from tokbackend.tokenizer import AcceleratedTokenizerMixin, accelerate, ids_as_arrays
from tokbackend.version import VERSION as __version__

from tokbackend.backends import preload as _preload  # isort: skip


def preload() -> None:
    """Import, on a background thread, what the first `accelerate()` would import: the backends'
    libraries (awkward alone takes 0.1-0.3 s of a 2-core machine), a guard derivation, auto's
    routing, the library versions guard records name. Returns at once; for a process with other
    start-up work to do meanwhile (the SGLang and vLLM plugins call it). A fork waits for it.
    `import tokbackend` itself starts no thread. Off with TOKBACKEND_PRELOAD=0."""
    _preload.start(then=_first_build_imports)


def _first_build_imports() -> None:
    """What the first `accelerate()` imports or reads lazily (~15 ms on 2 cores): a guard
    derivation, auto's routing, and the library versions guard records name."""
    import tokbackend.guard.derive  # noqa: F401
    import tokbackend.routing.auto  # noqa: F401
    from tokbackend.backends import BUILTIN_BACKENDS, backend_class
    from tokbackend.guard import guard_versions

    guard_versions(tuple(library for name in BUILTIN_BACKENDS for library in backend_class(name).versioned_libraries))


__all__ = [
    "DEFAULT_MODEL",
    "AcceleratedTokenizerMixin",
    "AccelerationOptions",
    "AccelerationState",
    "BackendUnavailableError",
    "EncodeBackend",
    "FallbackReason",
    "FastPathError",
    "ModelNotFoundError",
    "__version__",
    "accelerate",
    "available_backends",
    "ids_as_arrays",
    "load",
    "load_hf",
    "preload",
    "register_backend",
]
