"""tokbackend: fast, exact plain-text encode for HuggingFace tokenizers in serving stacks.

>>> import tokbackend
>>> tokenizer = tokbackend.load("qwen3.6")            # doctest: +SKIP
>>> fast = tokbackend.accelerate(hf_tokenizer)          # doctest: +SKIP
>>> fast.tokbackend.stats()                             # doctest: +SKIP
"""

import importlib
from types import MappingProxyType
from typing import Any

from tokbackend._build import FastPathError
from tokbackend._errors import TokbackendError
from tokbackend._guard import DerivationBudget, GuardSettings
from tokbackend._options import AccelerationOptions
from tokbackend._policy import FallbackReason
from tokbackend._state import AccelerationState
from tokbackend._stats import Stats
from tokbackend._version import VERSION as __version__
from tokbackend.backends import BackendUnavailableError, EncodeBackend, available_backends, register_backend

from tokbackend._process import preload as _preload  # isort: skip

# What imports transformers (about a second) is imported on first use: `tokbackend --help`, a
# process that registers a backend or reads the version, imports none of it. Whoever calls these
# has a HuggingFace tokenizer, so transformers is imported already.
_ON_FIRST_USE = MappingProxyType(
    {
        **dict.fromkeys(("DEFAULT_MODEL", "ModelFilesError", "ModelNotFoundError", "load", "load_hf"), "tokbackend._loading"),
        **dict.fromkeys(("AcceleratedTokenizerMixin", "accelerate", "ids_as_arrays"), "tokbackend._tokenizer"),
    }
)


def __getattr__(name: str) -> Any:
    """Import what `_ON_FIRST_USE` names when it is first read."""
    if name in {"_loading", "_tokenizer"}:  # `tokbackend._loading.resolve_model` after `import tokbackend`
        return importlib.import_module(f"tokbackend.{name}")
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
    """What the first `accelerate()` imports or reads lazily, besides the backends' libraries."""
    import tokbackend._guard.derive  # noqa: F401
    import tokbackend._routing.auto  # noqa: F401
    from tokbackend._guard import guard_versions
    from tokbackend.backends import BUILTIN_BACKENDS, versioned_libraries

    guard_versions(versioned_libraries(BUILTIN_BACKENDS))


__all__ = [
    "DEFAULT_MODEL",
    "AcceleratedTokenizerMixin",
    "AccelerationOptions",
    "AccelerationState",
    "BackendUnavailableError",
    "DerivationBudget",
    "EncodeBackend",
    "FallbackReason",
    "FastPathError",
    "GuardSettings",
    "ModelFilesError",
    "ModelNotFoundError",
    "Stats",
    "TokbackendError",
    "__version__",
    "accelerate",
    "available_backends",
    "ids_as_arrays",
    "load",
    "load_hf",
    "preload",
    "register_backend",
]
