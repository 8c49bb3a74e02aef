"""The narrow interface every encode backend implements: the low layer, below a hard cut.

A backend is built from a tokenizer.json's text and its own typed options, and turns text into ids
exactly as HuggingFace does with `add_special_tokens=False`; everything HuggingFace-shaped is above.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from tokbackend._errors import TokbackendError

# Default growth budget, in MiB, of a backend whose caches grow without bound (`_renewal`).
DEFAULT_CACHE_BUDGET_MIB = 256

# texts -> one id list each: a backend's `encode_batch`, or HuggingFace's ids for the same texts
BatchEncoder = Callable[[list[str]], list[list[int]]]


class BackendUnavailableError(TokbackendError, RuntimeError):
    """The backend cannot serve this tokenizer (it cannot load it, or not exactly)."""


class BackendPanicError(TokbackendError, RuntimeError):
    """A Rust panic inside a backend library, re-raised as an ordinary exception."""


def is_rust_panic(error: BaseException) -> bool:
    """Whether `error` is pyo3's PanicException, a BaseException that passes `except Exception`."""
    kind = type(error)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def is_error(error: BaseException) -> bool:
    """An error to report or answer with: any Exception, and a Rust panic (not KeyboardInterrupt)."""
    return isinstance(error, Exception) or is_rust_panic(error)


def import_library(module: str, requirement: str) -> ModuleType:
    """The backend's library, or BackendUnavailableError naming the package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise BackendUnavailableError(f"{module} is not installed ({error}); pip install '{requirement}'") from error


@contextlib.contextmanager
def loading_tokenizer_json(library: str) -> Iterator[None]:
    """Any failure to load a tokenizer.json, a Rust panic included, as BackendUnavailableError."""
    try:
        with PanicConverter(library, "loading"):
            yield
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BackendUnavailableError(f"{library} cannot load this tokenizer.json ({reason})") from error


class PanicConverter:
    """`with PanicConverter(library):` re-raises a Rust panic inside `library` as `error_class`,
    saying what it was `doing` (a class: one made once serves every call, in fewer frames)."""

    def __init__(self, library: str, doing: str = "encoding", error_class: type[Exception] = BackendPanicError) -> None:
        self.library, self.doing, self.error_class = library, doing, error_class

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        if error is not None and is_rust_panic(error):
            raise self.converted(error) from None

    def converted(self, error: BaseException) -> BaseException:
        """What to raise for `error`: a panic as `error_class`, any other as it is."""
        if is_rust_panic(error):
            return self.error_class(f"{self.library} panicked while {self.doing}: {error}")
        return error


@runtime_checkable
class EncodeBackend(Protocol):
    """Text -> ids, for one tokenizer, safe to call from many threads at once. Optional extras:
    `encode_array`, `encode_batch_arrays` (`_arrays`), `auto_preference` (default 50), `preloads`."""

    # Instance attributes (`RenewingBackend`, a wrapper, sets them on itself), so no ClassVar.
    name: str
    is_reference: bool  # HuggingFace's own encoder, the one the others are compared with
    needs_unicode_guard: bool  # text is screened for code points where it and HF diverge
    versioned_libraries: tuple[str, ...]  # libraries (besides tokenizers) its guard records depend on
    guard_family: str  # the name its guard records are filed under (its library's)
    grows_without_bound: bool  # its caches never shrink: served through `RenewingBackend`

    def encode(self, text: str) -> list[int]:
        """Ids of one text, special/added tokens inside it matched as HuggingFace does."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of many texts; may use several threads."""

    def stats(self) -> dict[str, Any]:
        """Backend-specific counters for `tokenizer.tokbackend.stats()`."""

    def prepare(self) -> None:
        """A warm-up, run once before `accelerate()` returns. May do nothing."""


class BackendClass(Protocol):
    """What the registry maps a name to: `Backend(tokenizer_json, options)`, raising
    `BackendUnavailableError` for a tokenizer.json it cannot serve; `options_for_scanning()` are
    the options of a guard derivation's throw-away instances."""

    Options: type
    name: str
    is_reference: bool
    needs_unicode_guard: bool
    versioned_libraries: tuple[str, ...]
    guard_family: str
    grows_without_bound: bool
    auto_preference: int

    def __call__(self, tokenizer_json: str, options: Any = ...) -> EncodeBackend: ...

    def options_for_scanning(self) -> Any: ...
