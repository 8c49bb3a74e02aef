"""Lanes and routings: which backend, with which Unicode guard, answers which call.

A lane is one backend built for one tokenizer, with the guard derived for that backend. A
routing names the lane that answers every call, and why, and encodes through it: texts the
lane's guard flags go to HuggingFace, the rest to the backend.
"""

from __future__ import annotations

import dataclasses
import functools
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from tokbackend._cache_dir import cache_dir
from tokbackend._guard import GuardUnavailableError, UnicodeGuard, load_guard
from tokbackend._probe import ascii_probe
from tokbackend._process.threads import OnItsOwnThread
from tokbackend.backends import EncodeBackend, backend_class
from tokbackend.backends._arrays import encode_array, encode_batch_arrays
from tokbackend.backends._base import BackendUnavailableError, BatchEncoder, panics_as_errors
from tokbackend.backends._renewal import RenewingBackend

if TYPE_CHECKING:
    from tokbackend._options import AccelerationOptions
    from tokbackend._reference import Reference

# Up to this many texts of a `one_by_one` call (the pieces a segment-cache request misses) are
# encoded one by one with single-text calls rather than as a batch: they are typically one long
# new message and a few short ones, and a batch call gives each text one thread, where a
# single-text call splits a long text across the pool (`bench/backends.py cache-cost`).
FEW_TEXTS = 4


@dataclasses.dataclass(frozen=True)
class Lane:
    """A backend with the Unicode guard derived for it."""

    name: str
    backend: EncodeBackend
    guard: UnicodeGuard


@dataclasses.dataclass(frozen=True)
class Routing:
    """The lane that answers every call, and why."""

    lane: Lane
    reason: str

    def describe(self) -> dict[str, str]:
        return {"backend": self.lane.name, "reason": self.reason}

    @overload
    def encode(
        self, texts: list[str], hf_ids: BatchEncoder, one_by_one: bool = False, arrays: Literal[False] = False
    ) -> tuple[list[list[int]], set[int]]: ...
    @overload
    def encode(
        self, texts: list[str], hf_ids: BatchEncoder, one_by_one: bool = False, arrays: bool = False
    ) -> tuple[list[list[int]] | list[array[int]], set[int]]: ...
    def encode(
        self, texts: list[str], hf_ids: BatchEncoder, one_by_one: bool = False, arrays: bool = False
    ) -> tuple[Sequence[list[int] | array[int]], set[int]]:
        """(ids of each text, indexes of the texts the Unicode guard sent to HuggingFace): the
        lane's backend answers the others, in one batch call, or one single-text call each for
        one text or, with `one_by_one`, at most `FEW_TEXTS` texts.
        With `arrays`, every text's ids are an `array('q')` (from the backend's own buffer)."""
        lane = self.lane
        if len(texts) == 1:  # the common call, without the bookkeeping of a batch
            text = texts[0]
            if lane.guard.needs_hf(text):
                sequence = hf_ids(texts)[0]
                return [array("q", sequence) if arrays else sequence], {0}
            return [encode_array(lane.backend, text) if arrays else lane.backend.encode(text)], set()
        few = one_by_one and len(texts) <= FEW_TEXTS
        guarded = lane.guard.guarded(texts)
        rest = [index for index in range(len(texts)) if index not in guarded]
        ids: list[Any] = [None] * len(texts)
        if rest:
            backend = lane.backend
            if few:
                one = functools.partial(encode_array, backend) if arrays else backend.encode
                answered: Sequence[list[int] | array[int]] = [one(texts[index]) for index in rest]
            else:
                rest_texts = [texts[index] for index in rest]
                answered = encode_batch_arrays(backend, rest_texts) if arrays else backend.encode_batch(rest_texts)
            for index, answer in zip(rest, answered):
                ids[index] = answer
        if guarded:
            order = sorted(guarded)
            for index, sequence in zip(order, hf_ids([texts[i] for i in order])):
                ids[index] = array("q", sequence) if arrays else sequence
        return ids, guarded


def build_lane(name: str, tokenizer_json: str, options: AccelerationOptions, reference: Reference | None = None) -> Lane:
    """Build backend `name` for this tokenizer.json, bounded by the cache budget where its
    caches never shrink, with its exact guard. Raises BackendUnavailableError,
    GuardUnavailableError. A guard that must be derived screens on `reference` (the ids of this
    tokenizer's Rust tokenizer) and the lane's own backend, so the start-up builds no second
    instance of either for its screen.

    The backend loads on a thread of its own while the guard is found or derived: both loads
    release the GIL (fastokens' `from_json_str` measured), and a derivation
    builds an instance of its own, so a pipeline without a record pays for one load, not two.
    Where the guard must be derived and `options.probe`, the loaded backend is first probed on
    ASCII (`ascii_probe`) against HuggingFace's ids: one wrong there is refused in milliseconds, where its
    derivation would find nearly every code point divergent and scan them all (most of an
    hour), to be refused by the probe after it. Without
    the probe the derivation refuses such a backend itself, and any derivation stops past
    `options.guard.budget` (GuardUnavailableError: the backend is not exact here).
    A Rust panic anywhere in it (the load, the derivation, the ASCII probe), or any other error
    (a derivation that cannot read its package data, say), is BackendUnavailableError naming it:
    "auto" moves to its next candidate, a named backend raises or, with allow_hf_fallback, is
    served by HuggingFace with the reason in stats()."""
    try:
        with panics_as_errors(name, "building its lane", BackendUnavailableError):
            return _built_lane(name, tokenizer_json, options, reference)
    except (BackendUnavailableError, GuardUnavailableError, ImportError):
        raise
    except Exception as error:
        raise BackendUnavailableError(f"backend {name}: building its lane failed: {type(error).__name__}: {error}") from error


def _built_lane(name: str, tokenizer_json: str, options: AccelerationOptions, reference: Reference | None) -> Lane:
    kind = backend_class(name)

    def load() -> EncodeBackend:
        if kind.grows_without_bound and options.cache_budget_mib is not None:
            return RenewingBackend(lambda: kind(tokenizer_json, kind.Options()), options.cache_budget_mib)
        return kind(tokenizer_json, kind.Options())

    guard_mode = options.unicode_guard if kind.needs_unicode_guard else "off"
    loading = OnItsOwnThread(load, "tokbackend-backend-load")

    def wrong_on_ascii() -> str | None:
        assert reference is not None
        mismatch = ascii_probe(loading.result(), reference.hf_ids).mismatch
        if mismatch is None:
            return None
        return (
            f"the backend disagrees with HuggingFace on the ASCII text {mismatch.text!r} (first difference at index "
            f"{mismatch.first_difference}: backend {mismatch.backend_ids[:12]}, HF {mismatch.hf_ids[:12]}), "
            "which no guard sends to HuggingFace"
        )

    try:
        guard = load_guard(
            tokenizer_json,
            kind.guard_family,
            tuple(kind.versioned_libraries),
            lambda text: kind(text, kind.options_for_scanning()),
            guard_mode,
            cache_dir(),
            options.guard,
            served=None if reference is None else (reference.rust_ids, lambda texts: loading.result().encode_batch(texts)),
            refuses=wrong_on_ascii if options.probe and reference is not None else None,
        )
    except BaseException:
        loading.result()  # a backend that cannot load is the clearer cause: raise that first
        raise
    return Lane(name, loading.result(), guard)
