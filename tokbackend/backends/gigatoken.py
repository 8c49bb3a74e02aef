"""The gigatoken backend: SIMD BPE encode in Rust, with a shared rayon pool for batches.

Every call goes through gigatoken's batch entry point (`encode_batch_list`), also for a
single text: that entry point borrows the Rust tokenizer shared, so any number of threads
may encode at once, whereas gigatoken's single-text `encode` borrows it mutably and raises
"Already borrowed" under concurrency. The result is already a list of Python ints.
"""

from __future__ import annotations

import os
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


def _panic_type() -> type[BaseException] | None:
    try:
        from pyo3_runtime import PanicException  # type: ignore[import-not-found]
    except ImportError:
        return None
    return PanicException


class BackendPanicError(RuntimeError):
    """A Rust panic inside gigatoken, re-raised as an ordinary exception."""


class GigatokenBackend:
    """Plain-text encode through gigatoken, loaded from the tokenizer's own tokenizer.json."""

    name = "gigatoken"
    needs_unicode_guard = True  # ICU4X's Unicode tables are newer than HF tokenizers'

    def __init__(self, hf_tokenizer: PreTrainedTokenizerBase) -> None:
        import gigatoken

        backend_tokenizer = getattr(hf_tokenizer, "backend_tokenizer", None)
        if backend_tokenizer is None:
            raise BackendUnavailableError(f"{type(hf_tokenizer).__name__} is not a fast tokenizer (no backend_tokenizer)")
        try:
            self._rust = gigatoken.Tokenizer.from_json(backend_tokenizer.to_str()).backend
        except Exception as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise BackendUnavailableError(f"gigatoken cannot load this tokenizer.json ({reason})") from error
        self._panic = _panic_type()
        self._warm_up()

    def _warm_up(self) -> None:
        # gigatoken builds its thread pool and per-thread state on first use; doing it here
        # keeps that cost off the first burst of requests a fresh replica receives.
        if not _forked:
            self.encode_batch(_warmup_texts())

    def encode(self, text: str) -> list[int]:
        return self._call(self._rust.encode_batch_list, [text], parallel=False)[0]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self._call(self._rust.encode_batch_list, texts, parallel=not _forked and len(texts) > 1)

    def _call(self, method, texts: list[str], parallel: bool) -> list[list[int]]:
        try:
            return method(texts, parallel=parallel)
        except BaseException as error:
            # pyo3's PanicException derives from BaseException and would sail past every
            # `except Exception` in a server; turn it into an ordinary, named error.
            if self._panic is not None and isinstance(error, self._panic):
                raise BackendPanicError(f"gigatoken panicked while encoding: {error}") from None
            raise
