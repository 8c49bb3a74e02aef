"""The gigatoken backend: SIMD BPE encode in Rust, with a shared rayon pool for batches.

Every call goes through gigatoken's batch entry point (`encode_batch_list`), also for a
single text: that entry point borrows the Rust tokenizer shared, so any number of threads
may encode at once, whereas gigatoken's single-text `encode` borrows it mutably and raises
"Already borrowed" under concurrency. The result is already a list of Python ints.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tokbackend.backends.base import BackendUnavailableError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# A rayon pool created before os.fork() has no worker threads in the child, and handing it
# work there waits forever. Children made by fork therefore encode on the calling thread;
# spawned children are fresh interpreters and keep the parallel batch path.
_forked = False


def _mark_forked() -> None:
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


def _warmup_texts(chars: int = 4_000_000, piece: int = 100_000) -> list[str]:
    """Real text to warm gigatoken's per-worker state with: the Python sources of the installed
    transformers package (code, English docstrings), read in a fixed order.

    gigatoken's workers start with empty pretoken caches and cold allocators, which makes the
    first burst of long prompts 3-4x slower than later ones. Encoding ~4 MB of real text once,
    at build time, moves that cost off the first requests a fresh replica receives. The text
    is independent of anything a benchmark or a user sends, so it warms, it does not memorize.
    """
    import transformers

    pieces: list[str] = []
    total = 0
    for path in sorted(Path(transformers.__file__).parent.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        pieces.append(text)
        total += len(text)
        if total >= chars:
            break
    corpus = "".join(pieces)[:chars]
    return [corpus[start : start + piece] for start in range(0, len(corpus), piece)]


def _is_rust_panic(error: BaseException) -> bool:
    # pyo3 creates PanicException at run time in a module that cannot be imported by name.
    kind = type(error)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


class BackendPanicError(RuntimeError):
    """A Rust panic inside gigatoken, re-raised as an ordinary exception."""


DEFAULT_CACHE_BUDGET_MIB = 256
# How much text (in characters) passes between two looks at the process's resident memory:
# one read of /proc (~10 us) per ~10 prompts of 32k tokens.
_CHECK_EVERY_CHARS = 1 << 20


def _release_freed_memory() -> None:
    """Hand memory freed by the old caches back to the OS (glibc keeps it in its arenas
    otherwise, and resident memory would not show that the caches were dropped)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _resident_bytes() -> int | None:
    """This process's resident set size, or None where /proc is not available."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class GigatokenBackend:
    """Plain-text encode through gigatoken, loaded from the tokenizer's own tokenizer.json.

    Memory: gigatoken 0.10.0 caches every distinct pretoken it meets, per worker, without
    bound (+1 GiB after 3,000 distinct random-word prompts). The caches belong to the Rust
    tokenizer object and are freed with it, so this backend watches the process's resident
    memory (one read of /proc every 1 M characters of input) and, once it has grown by half
    of `cache_budget_mib` since the last renewal, swaps in a spare tokenizer built ahead of
    time (its fixed cost, ~90 MiB for a 248k vocabulary, is paid once at start), returns the
    freed memory to the OS and builds the next spare on a background thread. The other half
    of the budget absorbs what one call can add between two looks. Output never depends on
    the caches, only speed does.
    `cache_budget_mib=None` turns the budget off.
    """

    name = "gigatoken"
    needs_unicode_guard = True  # ICU4X's Unicode tables are newer than HF tokenizers'

    def __init__(self, hf_tokenizer: PreTrainedTokenizerBase, cache_budget_mib: int | None = DEFAULT_CACHE_BUDGET_MIB) -> None:
        backend_tokenizer = getattr(hf_tokenizer, "backend_tokenizer", None)
        if backend_tokenizer is None:
            raise BackendUnavailableError(f"{type(hf_tokenizer).__name__} is not a fast tokenizer (no backend_tokenizer)")
        self._tokenizer_json = backend_tokenizer.to_str()
        self._budget_bytes = None if cache_budget_mib is None else int(cache_budget_mib) << 20
        self._chars_since_check = 0
        self._renewal_lock = threading.Lock()
        self._spare = None
        self.cache_renewals = 0
        self._rust = self._build()
        self._baseline = _resident_bytes()
        if self._budget_bytes is not None:
            # A second, warmed tokenizer waits so a renewal is an instant swap: growth during a
            # ~2 s rebuild would otherwise overshoot the budget on adversarial text.
            self._start_spare()

    def _build(self):
        import gigatoken

        try:
            rust = gigatoken.Tokenizer.from_json(self._tokenizer_json).backend
        except Exception as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise BackendUnavailableError(f"gigatoken cannot load this tokenizer.json ({reason})") from error
        if not _forked:
            # gigatoken builds its thread pool and per-worker state on first use; doing it here
            # keeps that cost off the first burst of requests a fresh replica receives.
            self._call(rust, _warmup_texts(), parallel=True)
        return rust

    def encode(self, text: str) -> list[int]:
        ids = self._call(self._rust, [text], parallel=False)[0]
        self._account(len(text))
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        ids = self._call(self._rust, texts, parallel=not _forked and len(texts) > 1)
        self._account(sum(map(len, texts)))
        return ids

    def stats(self) -> dict[str, int | None]:
        return {
            "cache_budget_mib": None if self._budget_bytes is None else self._budget_bytes >> 20,
            "cache_renewals": self.cache_renewals,
        }

    def _call(self, rust, texts: list[str], parallel: bool) -> list[list[int]]:
        try:
            return rust.encode_batch_list(texts, parallel=parallel)
        except BaseException as error:
            # pyo3's PanicException derives from BaseException and would sail past every
            # `except Exception` in a server; turn it into an ordinary, named error.
            if _is_rust_panic(error):
                raise BackendPanicError(f"gigatoken panicked while encoding: {error}") from None
            raise

    def _account(self, characters: int) -> None:
        if self._budget_bytes is None:
            return
        # Unlocked on purpose: a lost update only delays the next look at memory slightly.
        self._chars_since_check += characters
        if self._chars_since_check < _CHECK_EVERY_CHARS:
            return
        self._chars_since_check = 0
        resident = _resident_bytes()
        if resident is None or self._baseline is None or resident - self._baseline < self._budget_bytes // 2:
            return
        with self._renewal_lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return  # the next spare is still being built
        self._rust = spare  # in-flight calls finish on the old tokenizer, which is then freed
        self.cache_renewals += 1
        self._start_spare(after_renewal=True)

    def _start_spare(self, after_renewal: bool = False) -> None:
        threading.Thread(target=self._prepare_spare, args=(after_renewal,), name="tokbackend-spare", daemon=True).start()

    def _prepare_spare(self, after_renewal: bool) -> None:
        if after_renewal:
            time.sleep(0.1)  # let in-flight calls release the old tokenizer
            _release_freed_memory()
        spare = self._build()
        with self._renewal_lock:
            self._spare = spare
        _release_freed_memory()
        self._baseline = _resident_bytes()
