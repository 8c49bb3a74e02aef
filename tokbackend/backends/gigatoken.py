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

from tokbackend.backends.base import DEFAULT_CACHE_BUDGET_MIB, BackendUnavailableError

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


def _release_freed_memory() -> None:
    """Hand memory freed by the old caches back to the OS (glibc keeps it in its arenas
    otherwise, and resident memory would not show that the caches were dropped)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


_statm = {"pid": None, "fd": None}


def _resident_bytes() -> int | None:
    """This process's resident set size (~1.5 us: one pread of a kept /proc descriptor),
    or None where /proc is not available."""
    pid = os.getpid()
    try:
        if _statm["pid"] != pid:  # first call, or first call in a forked child
            _statm["fd"], _statm["pid"] = os.open("/proc/self/statm", os.O_RDONLY), pid
        return int(os.pread(_statm["fd"], 64, 0).split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class GigatokenBackend:
    """Plain-text encode through gigatoken, loaded from the tokenizer's own tokenizer.json.

    Memory: gigatoken 0.10.0 caches every distinct pretoken it meets, per worker, without
    bound (+1 GiB after 3,000 distinct random-word prompts), and has no call to clear them.
    The caches belong to the Rust tokenizer object and are freed with it, so this backend adds
    up how much the process's resident memory grows *during its own encode calls* (two reads of
    /proc per call, ~3 us; growth elsewhere in the process is not counted) and, at half of
    `cache_budget_mib`, swaps in a spare tokenizer built ahead of time, hands the freed memory
    back to the OS and builds the next spare on a background thread. The other half of the
    budget is headroom for calls in flight. Output never depends on the caches, only speed.
    Costs: the spare's fixed footprint (~90 MiB for a 248k vocabulary, built at start-up), and,
    because gigatoken holds the GIL while it loads a vocabulary (~1.1 s for 248k tokens), one
    pause of the process's Python threads per renewal; realistic traffic renews rarely (see
    bench/RESULTS.md).
    `cache_budget_mib=None` turns the budget off.
    """

    name = "gigatoken"
    needs_unicode_guard = True  # ICU4X's Unicode tables are newer than HF tokenizers'
    versioned_libraries = ("gigatoken",)
    # Guard records describe the library's Unicode tables, so subclasses registered under other
    # names share them.
    guard_family = "gigatoken"

    def __init__(self, tokenizer_json: str, cache_budget_mib: int | None = DEFAULT_CACHE_BUDGET_MIB, warm: bool = True) -> None:
        self._tokenizer_json = tokenizer_json
        self._warm = warm
        self._budget_bytes = None if cache_budget_mib is None else int(cache_budget_mib) << 20
        self._growth = 0
        self._spare_lock = threading.Lock()
        self._spare = None
        self.cache_renewals = 0
        self._rust = self._build()
        if self._budget_bytes is not None:
            # A second, warmed tokenizer waits so that a renewal is an instant swap. It is built
            # here, at start-up, because building one pauses every Python thread (see above).
            self._prepare_spare(after_renewal=False)

    def _build(self):
        import gigatoken

        try:
            rust = gigatoken.Tokenizer.from_json(self._tokenizer_json).backend
        except Exception as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise BackendUnavailableError(f"gigatoken cannot load this tokenizer.json ({reason})") from error
        if self._warm and not _forked:
            # gigatoken builds its thread pool and per-worker state on first use; doing it here
            # keeps that cost off the first burst of requests a fresh replica receives.
            self._call(rust, _warmup_texts(), parallel=True)
        return rust

    def encode(self, text: str) -> list[int]:
        return self._measured([text], parallel=False)[0]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self._measured(texts, parallel=not _forked and len(texts) > 1)

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

    def _measured(self, texts: list[str], parallel: bool) -> list[list[int]]:
        if self._budget_bytes is None:
            return self._call(self._rust, texts, parallel)
        before = _resident_bytes()
        ids = self._call(self._rust, texts, parallel)
        after = _resident_bytes()
        if before is not None and after is not None and after > before:
            # Unlocked on purpose: concurrent calls may count shared growth twice, which only
            # renews a little early.
            self._growth += after - before
            if self._growth >= self._budget_bytes // 2:
                self._renew()
        return ids

    def _renew(self) -> None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is None:
            return  # the next spare is still being built
        self._rust = spare  # in-flight calls finish on the old tokenizer, which is then freed
        self.cache_renewals += 1
        threading.Thread(target=self._prepare_spare, args=(True,), name="tokbackend-spare", daemon=True).start()

    def _prepare_spare(self, after_renewal: bool) -> None:
        if after_renewal:
            time.sleep(0.1)  # let in-flight calls release the old tokenizer
            _release_freed_memory()
        spare = self._build()
        with self._spare_lock:
            self._spare = spare
        # Growth seen while the spare was built is mostly the spare itself: start counting afresh.
        self._growth = 0
