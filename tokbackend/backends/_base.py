"""The narrow interface every encode backend implements.

This is the low layer of tokbackend, a hard cut: plain primitives in, plain primitives out. A
backend is built from the text of a tokenizer.json and its own typed options, and turns text
into token ids exactly as HuggingFace would with `add_special_tokens=False`, and nothing else:
no kwargs, padding, tensors or BatchEncoding. Everything HuggingFace-shaped lives above the
cut (`tokbackend._policy` decides per call whether a backend may answer, `tokbackend._routing`
picks the backend, `tokbackend._state` answers, `tokbackend._tokenizer` is the HuggingFace-facing
class).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

# Default growth budget, in MiB, for backends whose caches grow without bound (see
# `tokbackend.backends._renewal`).
DEFAULT_CACHE_BUDGET_MIB = 256


class BackendUnavailableError(RuntimeError):
    """The backend cannot serve this tokenizer (it cannot load it, or not exactly)."""


class BackendPanicError(RuntimeError):
    """A Rust panic inside a backend library, re-raised as an ordinary exception."""


def is_rust_panic(error: BaseException) -> bool:
    """pyo3's PanicException derives from BaseException and would sail past every `except
    Exception` in a server; it is created at run time in a module that cannot be imported."""
    kind = type(error)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def is_error(error: BaseException) -> bool:
    """An error to report or answer with: any Exception, and a Rust panic; not KeyboardInterrupt,
    SystemExit and the like, which go through."""
    return isinstance(error, Exception) or is_rust_panic(error)


def import_library(module: str, requirement: str) -> ModuleType:
    """The backend's library, or BackendUnavailableError naming the package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise BackendUnavailableError(f"{module} is not installed ({error}); pip install '{requirement}'") from error


@contextlib.contextmanager
def loading_tokenizer_json(library: str) -> Iterator[None]:
    """Turns any failure to load a tokenizer.json, a Rust panic included, into
    BackendUnavailableError with its first line."""
    try:
        with panics_as_errors(library, "loading"):
            yield
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise BackendUnavailableError(f"{library} cannot load this tokenizer.json ({reason})") from error


class panics_as_errors:  # noqa: N801 - used as a context manager, named as one
    """`with panics_as_errors(library):` re-raises a Rust panic inside `library` (pyo3's
    PanicException, a BaseException that sails past `except Exception`) as `error_class`, an
    ordinary Exception, saying what it was `doing`; wrapped around whatever runs a backend,
    wherever it runs, so that a panic is a reported error (auto moves on, a server stops with the
    reason), never a thread that died. It keeps no state: one made once serves every call and
    thread (two Python frames a call, where a generator-based context manager takes six)."""

    def __init__(self, library: str, doing: str = "encoding", error_class: type[Exception] = BackendPanicError) -> None:
        self.library, self.doing, self.error_class = library, doing, error_class

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        if error is not None and is_rust_panic(error):
            raise self.converted(error) from None

    def converted(self, error: BaseException) -> BaseException:
        """What to raise for `error` caught around the library: a panic as `error_class`, any
        other as it is (for a hot path's `try`/`except`, which costs no frame while nothing fails)."""
        if is_rust_panic(error):
            return self.error_class(f"{self.library} panicked while {self.doing}: {error}")
        return error


# texts -> one id list each: a backend's `encode_batch`, HuggingFace's ids for them (the answer
# every backend must match), either side of a guard's scan
BatchEncoder = Callable[[list[str]], list[list[int]]]


@runtime_checkable
class EncodeBackend(Protocol):
    """Text -> ids, for one tokenizer, safe to call from many threads at once."""

    # Class attributes, which `RenewingBackend` (a wrapper) sets on each instance: no ClassVar.
    name: str
    # Whether this is HuggingFace's own encoder, the reference the others are compared with
    # (never a candidate of "auto").
    is_reference: bool
    # Whether text must be screened for code points on which this backend and HF diverge
    # (see tokbackend._guard); False only for backends that are the reference itself.
    needs_unicode_guard: bool
    # Libraries whose versions a guard record for this backend depends on (besides tokenizers),
    # and the name its records are filed under (the library's, whatever name it is registered as).
    versioned_libraries: tuple[str, ...]
    guard_family: str
    # Whether its caches grow with every distinct text and never shrink; such a backend is
    # served through `RenewingBackend`, which bounds them.
    grows_without_bound: bool
    # Optional: `auto_preference`, where "auto" tries it: lower first (fastokens 10, gigatoken 20; 50 when not declared).
    # Optional: `preloads`, modules to import in the background from `import tokbackend`
    # (`tokbackend._process.preload`): a library the backend's first calls would import.

    def encode(self, text: str) -> list[int]:
        """Ids of one text, special/added tokens inside it matched as HuggingFace does."""
        ...

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of many texts; may use several threads."""
        ...

    def stats(self) -> dict[str, Any]:
        """Backend-specific counters for `tokenizer.tokbackend.stats()`."""
        ...

    # Optional: `encode_array(text)` and `encode_batch_arrays(texts)`, the same ids as
    # `array('q')`, built from the backend's own buffer (see tokbackend.backends._arrays).

    def prepare(self) -> None:
        """Work that makes the first calls fast (a warm-up, a spare instance); run once on a
        background thread after the lane is built and probed, so that it never delays start-up.
        Calls may arrive before it finishes; they are exact, only slower. May do nothing."""
        ...


class BackendClass(Protocol):
    """What the registry maps a name to: a class built as `Backend(tokenizer_json, options)`.

    `Options` is the backend's own (frozen dataclass) options type; `options_for_scanning()`
    gives the options of throw-away instances, such as those a guard derivation builds (whose
    `prepare` is never called). Raise `BackendUnavailableError` for a tokenizer.json the backend cannot serve.
    """

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
