"""tokbackend: fast, exact plain-text encode for HuggingFace tokenizers in serving stacks.

>>> import tokbackend
>>> tokenizer = tokbackend.load("qwen3.6")            # doctest: +SKIP
>>> fast = tokbackend.accelerate(hf_tokenizer)          # doctest: +SKIP
>>> fast.tokbackend.stats()                             # doctest: +SKIP
"""

import importlib
import warnings
from types import MappingProxyType
from typing import Any

from tokbackend import _version
from tokbackend._build import FastPathError
from tokbackend._errors import TokbackendError
from tokbackend._guard import GuardSettings
from tokbackend._options import AccelerationOptions
from tokbackend._policy import FallbackReason
from tokbackend._stats import Stats
from tokbackend.backends import BackendUnavailableError

from tokbackend._process import preload as _preload  # isort: skip

__version__ = _version.VERSION  # an attribute, outside __all__

# What imports transformers (about a second) is imported on first use: `tokbackend --help`, a
# process that registers a backend or reads the version, imports none of it. Whoever calls these
# has a HuggingFace tokenizer, so transformers is imported already.
_ON_FIRST_USE = MappingProxyType(
    {
        **dict.fromkeys(("ModelFilesError", "ModelNotFoundError", "load", "load_hf"), "tokbackend._loading"),
        **dict.fromkeys(("accelerate", "ids_as_arrays"), "tokbackend._tokenizer"),
    }
)

# Names that left the package's namespace (CHANGELOG, "Deprecated"): each still resolves, with a
# DeprecationWarning naming what to use instead, until the release after. {name: (module, instead)}
_DEPRECATED = MappingProxyType(
    {
        "DEFAULT_MODEL": ("tokbackend._loading", "tokbackend.load() without a name loads the default model"),
        "AcceleratedTokenizerMixin": (
            "tokbackend._tokenizer",
            "an accelerated tokenizer is one with a `tokbackend` attribute: hasattr(tokenizer, 'tokbackend')",
        ),
        "AccelerationState": ("tokbackend._state", "use tokenizer.tokbackend, the object accelerate() attaches"),
        "DerivationBudget": (
            "tokbackend._guard",
            "dataclasses.replace(tokbackend.GuardSettings().budget, seconds=..., megabytes=...) makes one",
        ),
        "EncodeBackend": ("tokbackend.backends", "use tokbackend.backends.EncodeBackend"),
        "available_backends": ("tokbackend.backends", "use tokbackend.backends.available_backends"),
        "register_backend": ("tokbackend.backends", "use tokbackend.backends.register_backend"),
    }
)


def __getattr__(name: str) -> Any:
    """Import what `_ON_FIRST_USE` names when it is first read; warn on a name `_DEPRECATED` lists."""
    if name in {"_loading", "_tokenizer"}:  # `tokbackend._loading.resolve_model` after `import tokbackend`
        return importlib.import_module(f"tokbackend.{name}")
    if name in _DEPRECATED:
        module, instead = _DEPRECATED[name]
        message = f"tokbackend.{name} is deprecated and leaves tokbackend's namespace in the next release: {instead}"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), name)  # not cached: every read warns
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module 'tokbackend' has no attribute {name!r}")
    value = getattr(importlib.import_module(_ON_FIRST_USE[name]), name)
    globals()[name] = value
    return value


def preload() -> None:
    """Import, on a background thread, what the first `accelerate()` would import (the backends'
    libraries, a guard derivation, auto's routing), for a process with other start-up work to do
    meanwhile (the SGLang and vLLM plugins call it). Returns at once; a fork waits for it.
    `import tokbackend` itself starts no thread. Off with TOKBACKEND_PRELOAD=0."""
    _preload.start(_first_build_imports)


def _first_build_imports() -> None:
    """What the first `accelerate()` imports or reads lazily: the modules the built-in backends
    declare (`preloads`), where installed, then a guard derivation's and auto's modules."""
    import importlib.util

    from tokbackend.backends import BUILTIN_BACKENDS, backend_class, versioned_libraries

    for name in BUILTIN_BACKENDS:
        try:
            for module in getattr(backend_class(name), "preloads", ()):
                if importlib.util.find_spec(module) is not None:
                    importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a library that fails to import fails again, loudly, where it is used
            continue
    import tokbackend._guard.derive  # noqa: F401
    import tokbackend._routing.auto  # noqa: F401
    from tokbackend._guard import guard_versions

    guard_versions(versioned_libraries(BUILTIN_BACKENDS))


# What a user names: the calls, their options, what stats() returns and the errors to catch. A
# backend of your own registers through tokbackend.backends; `__version__` is an attribute, not
# an API (tests/test_surface.py holds this list).
__all__ = [
    "AccelerationOptions",
    "BackendUnavailableError",
    "FallbackReason",
    "FastPathError",
    "GuardSettings",
    "ModelFilesError",
    "ModelNotFoundError",
    "Stats",
    "TokbackendError",
    "accelerate",
    "ids_as_arrays",
    "load",
    "load_hf",
    "preload",
]
