"""The acceleration state of one tokenizer: its backends and guards, probe, routing and stats.

`AccelerationState` is what `accelerate()` attaches (reach it as `tokenizer.tokbackend`). It
builds the backend lanes for the tokenizer's current state (a lane: a backend and the Unicode
guard derived for it), rebuilds them when tokens are added (through any path) or the
post-processor changes, probes them against HuggingFace, and answers plain-text encodes:
guarded texts from HuggingFace, the rest from the single-text or batch lane.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from tokbackend.backends import AUTO, BackendUnavailableError, EncodeBackend, backend_class
from tokbackend.backends.forking import fork_safe_lock
from tokbackend.backends.renewal import RenewingBackend
from tokbackend.cache import cache_dir
from tokbackend.guard import GuardUnavailableError, UnicodeGuard, load_guard
from tokbackend.models.qwen import builtin_name_of
from tokbackend.options import AccelerationOptions
from tokbackend.policy import FallbackReason
from tokbackend.probe import run_probe
from tokbackend.segments import AddedTokenSplitter, Piece, Prefix, SegmentCache, text_of
from tokbackend.stats import AccelerationStats

if TYPE_CHECKING:
    from tokbackend.tokenizer import AcceleratedTokenizerMixin

logger = logging.getLogger("tokbackend")


class FastPathError(RuntimeError):
    """`strict=True` and the backend disagreed with HuggingFace during the boot probe."""


@dataclasses.dataclass(frozen=True)
class Lane:
    """A backend with the Unicode guard derived for it."""

    name: str
    backend: EncodeBackend
    guard: UnicodeGuard


@dataclasses.dataclass(frozen=True)
class Routing:
    """Which lane answers single texts and which batches, and why."""

    single: Lane
    batch: Lane
    reason: str

    def describe(self) -> dict[str, str]:
        return {"single": self.single.name, "batch": self.batch.name, "reason": self.reason}


def build_lane(name: str, tokenizer_json: str, options: AccelerationOptions) -> Lane:
    """Build backend `name` for this tokenizer.json, bounded by the cache budget where its
    caches never shrink, with its guard. Raises BackendUnavailableError, GuardUnavailableError."""
    kind = backend_class(name)
    if kind.grows_without_bound and options.cache_budget_mib is not None:
        backend: EncodeBackend = RenewingBackend(lambda: kind(tokenizer_json, kind.Options()), options.cache_budget_mib)
    else:
        backend = kind(tokenizer_json, kind.Options())
    guard_mode = options.unicode_guard if kind.needs_unicode_guard else "off"
    guard = load_guard(
        tokenizer_json,
        kind.guard_family,
        tuple(kind.versioned_libraries),
        lambda text: kind(text, kind.options_for_scanning()),
        guard_mode,
        cache_dir(),
    )
    return Lane(name, backend, guard)


def probe_mismatch(lane: Lane, tokenizer: AcceleratedTokenizerMixin, model: str) -> tuple[str | None, float]:
    """(a message naming the first edge string the lane gets wrong, or None; seconds taken)."""
    result = run_probe(lane.backend, tokenizer, lane.guard)
    mismatch = result.mismatch
    if mismatch is None:
        return None, result.seconds
    return (
        f"backend {lane.name!r} disagrees with HuggingFace for {model} on {mismatch.text!r} (first difference at index "
        f"{mismatch.first_difference}: backend {mismatch.backend_ids[:12]}, HF {mismatch.hf_ids[:12]})",
        result.seconds,
    )


def fingerprint(tokenizer: Any) -> tuple[int, str]:
    """Cheap identity of what the lanes were built from: vocab size with added tokens (0.5 us)
    and the post-processor's serialized form (which is what adds BOS/EOS)."""
    rust = tokenizer._tokenizer
    post_processor = rust.post_processor
    return rust.get_vocab_size(with_added_tokens=True), "" if post_processor is None else str(post_processor.__getstate__())


def special_token_affixes(tokenizer: AcceleratedTokenizerMixin) -> tuple[list[int], list[int]] | None:
    """The ids HF's post-processor puts before and after one sequence, derived by asking HF
    itself on probe texts; None when its effect is not a fixed prefix/suffix."""
    probes = ["tokbackend probe", "x"]
    with_special = tokenizer._hf_ids(probes, add_special_tokens=True)
    without = tokenizer._hf_ids(probes, add_special_tokens=False)
    affixes = None
    for full, bare in zip(with_special, without):
        for start in range(len(full) - len(bare) + 1):
            if full[start : start + len(bare)] == bare:
                found = (full[:start], full[start + len(bare) :])
                break
        else:
            return None
        if affixes is not None and found != affixes:
            return None
        affixes = found
    return affixes


def _is_valid_text(text: str) -> bool:
    """UTF-8 encodable: no lone surrogates (which no tokenizer can encode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Up to this many pieces that a segment-cache request misses are encoded one by one on the
# single-text lane rather than as a batch: they are typically one long new message and a few short
# ones, and a batch call gives each text one thread, where a single-text call splits a long text
# across the pool (measured with `bench/backends.py cache-cost`: a ChatML request's two pieces
# took 1.9x the plain encode as a batch).
_FEW_TEXTS = 4


def _assemble(
    parts: list[str | Piece | int],
    found: dict[str | Piece, list[int]],
    head: Prefix | None,
    exclusive: set[str | Piece],
    lengths: dict[int, int],
) -> tuple[list[int], int, tuple[int, int] | None]:
    """(ids of the text, how many came from `head`, (characters, ids) up to its last added token
    or None). Without a head, the longest piece in `exclusive` becomes the result in place (the
    ids before it are inserted in front: a move of pointers, where a copy would touch every id)."""
    chars, count = (head.chars, sum(map(len, head.chunks))) if head else (0, 0)
    reused, boundary = count, None
    for part in parts:
        if type(part) is int:
            chars += lengths[part]
            count += 1
            boundary = (chars, count)
        else:
            chars += len(part)
            count += len(found[part])
    largest = None
    if head is None and exclusive:
        for index, part in enumerate(parts):
            if type(part) is not int and part in exclusive and (largest is None or len(part) > len(parts[largest])):
                largest = index
    ids: list[int] = []  # the caller's own list: cached lists are never handed out
    if head:
        for chunk in head.chunks:
            ids += chunk
    if largest is None:
        _extend(ids, parts, found)
    else:
        _extend(ids, parts[:largest], found)
        ids, before = found[parts[largest]], ids
        ids[0:0] = before
        _extend(ids, parts[largest + 1 :], found)
    return ids, reused, boundary


def _extend(ids: list[int], parts: list[str | Piece | int], found: dict[str | Piece, list[int]]) -> None:
    for part in parts:
        if type(part) is int:
            ids.append(part)
        else:
            ids += found[part]


class AccelerationState:
    """See the module docstring. `stats()` reads the counters and the routing."""

    def __init__(self, tokenizer: Any, options: AccelerationOptions) -> None:
        self.options = options
        name_or_path = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        self.model = builtin_name_of(name_or_path) or name_or_path
        self.counters = AccelerationStats()
        self.disabled_reason: str | None = None
        self.probe_seconds = 0.0
        self.routing: Routing | None = None
        self.fingerprint: tuple[int, str] | None = None
        self.special_affixes: tuple[list[int], list[int]] | None = None
        self.splitter: AddedTokenSplitter | None = None
        self.segment_cache_unsupported: str | None = None
        self.segment_cache: SegmentCache | None = None
        self._rebuild_lock = fork_safe_lock(self, "_rebuild_lock")

    # -- what stats() and the logs show ---------------------------------------------------------

    @property
    def backend_name(self) -> str:
        return self.options.backend

    @property
    def fast_path_enabled(self) -> bool:
        return self.disabled_reason is None

    @property
    def backend(self) -> EncodeBackend | None:
        """The single-text lane's backend (the only one unless "auto" split the routing)."""
        return None if self.routing is None else self.routing.single.backend

    @property
    def guard(self) -> UnicodeGuard:
        return UnicodeGuard(frozenset()) if self.routing is None else self.routing.single.guard

    @guard.setter
    def guard(self, guard: UnicodeGuard) -> None:
        """Serve every lane with `guard` (tests plant defective guards this way)."""
        routing = self.routing
        single = dataclasses.replace(routing.single, guard=guard)
        batch = single if routing.batch is routing.single else dataclasses.replace(routing.batch, guard=guard)
        self.routing = Routing(single, batch, routing.reason)

    def stats(self) -> dict[str, Any]:
        """Counters and state, e.g. `{"backend": "gigatoken", "fast_calls": 3, "fallbacks": {...}}`."""
        routing = self.routing
        lanes = {} if routing is None else {lane.name: lane for lane in (routing.single, routing.batch)}
        backend_stats: dict[str, Any] = {}
        for lane in lanes.values():
            backend_stats.update(lane.backend.stats())
        return {
            "backend": self.backend_name,
            "model": self.model,
            "fast_path_enabled": self.fast_path_enabled,
            "disabled_reason": self.disabled_reason,
            "routing": None if routing is None else routing.describe(),
            "probe_seconds": self.probe_seconds,
            "guarded_code_points": len(self.guard.code_points),
            "guard_record": self.guard.record.get("path"),
            "segment_cache": self._segment_cache_stats(),
            **backend_stats,
            **self.counters.snapshot(),
        }

    def _segment_cache_stats(self) -> dict[str, Any]:
        if self.options.segment_cache_mib is None:
            return {"enabled": False}
        if self.segment_cache is None:
            return {"enabled": False, "unsupported": self.segment_cache_unsupported}
        return {"enabled": True, **self.segment_cache.stats()}

    def describe(self) -> str:
        """One line for start-up logs: backend, routing and why, guard, probe."""
        if self.routing is None or not self.fast_path_enabled:
            return f"backend {self.backend_name}, fast path off ({self.disabled_reason})"
        routing = self.routing
        lanes = routing.single.name
        if routing.batch is not routing.single:
            lanes = f"single {routing.single.name}, batch {routing.batch.name}"
        return (
            f"backend {self.backend_name} ({lanes}; {routing.reason}), "
            f"{len(self.guard.code_points)} guarded code points, probe {self.probe_seconds * 1000:.0f} ms"
        )

    def __repr__(self) -> str:
        state = "on" if self.fast_path_enabled else f"off ({self.disabled_reason})"
        return f"AccelerationState(backend={self.backend_name!r}, model={self.model!r}, fast_path={state})"

    def record_fallback(self, reason: FallbackReason, cause: BaseException | str | None = None, texts: int = 1) -> None:
        self.counters.record_fallback(reason, self.model, self.backend_name, cause, texts)

    # -- building -----------------------------------------------------------------------------

    def share_from(self, other: AccelerationState) -> None:
        """Serve with `other`'s lanes and counters (copies of one tokenizer share one backend)."""
        self.routing, self.fingerprint = other.routing, other.fingerprint
        self.special_affixes, self.disabled_reason = other.special_affixes, other.disabled_reason
        self.probe_seconds, self.counters = other.probe_seconds, other.counters
        self.splitter, self.segment_cache = other.splitter, other.segment_cache
        self.segment_cache_unsupported = other.segment_cache_unsupported

    def build(self, tokenizer: AcceleratedTokenizerMixin) -> None:
        """Build the lanes for the tokenizer's current state; called by accelerate() and whenever
        the fingerprint changes. BackendUnavailableError propagates unless allow_hf_fallback."""
        with self._rebuild_lock:
            current = fingerprint(tokenizer)
            if current == self.fingerprint:
                return  # another thread rebuilt it while this one waited
            try:
                self._build_locked(tokenizer)
            except BackendUnavailableError as error:
                message = f"backend {self.backend_name!r} cannot serve {self.model}: {error}"
                if not self.options.allow_hf_fallback:
                    raise BackendUnavailableError(
                        f"tokbackend: {message} (pass allow_hf_fallback=True to serve it with HuggingFace instead)"
                    ) from error
                logger.error("%s; serving with HuggingFace because allow_hf_fallback=True", message)
                self.disabled_reason = f"backend unavailable: {error}"
            self.fingerprint = current

    def _build_locked(self, tokenizer: AcceleratedTokenizerMixin) -> None:
        tokenizer_json = tokenizer.backend_tokenizer.to_str()
        self.special_affixes = special_token_affixes(tokenizer)
        self.disabled_reason = None
        self._build_segment_cache(tokenizer_json)
        if self.backend_name == AUTO:
            from tokbackend.auto import choose_routing

            self.routing, self.probe_seconds = choose_routing(tokenizer, tokenizer_json, self.options, self.model)
            return
        try:
            lane = build_lane(self.backend_name, tokenizer_json, self.options)
        except GuardUnavailableError as error:
            self._disable(f"{error}", strict_message=f"tokbackend: {self.model}: {error}")
            return
        self.routing = Routing(lane, lane, "named explicitly")
        if not self.options.probe:
            return
        mismatch, self.probe_seconds = probe_mismatch(lane, tokenizer, self.model)
        if mismatch is not None:
            self._disable(f"probe mismatch: {mismatch}", strict_message=f"tokbackend: {mismatch} (strict=True)")

    def _build_segment_cache(self, tokenizer_json: str) -> None:
        """A fresh (empty) cache for the tokenizer's current added tokens, when enabled and the
        split can be reproduced exactly; the reason it cannot otherwise (in stats)."""
        self.splitter, self.segment_cache, self.segment_cache_unsupported = None, None, None
        if self.options.segment_cache_mib is None:
            return
        splitter = AddedTokenSplitter.for_tokenizer_json(tokenizer_json)
        if isinstance(splitter, str):
            self.segment_cache_unsupported = splitter
            logger.info("%s: segment cache off: %s", self.model, splitter)
            return
        self.splitter = splitter
        self.segment_cache = SegmentCache(self.options.segment_cache_mib << 20, self.options.segment_cache_steps_aside)

    def _disable(self, reason: str, strict_message: str) -> None:
        if self.options.strict:
            raise FastPathError(strict_message)
        logger.error("%s: %s; the fast path is off and every encode goes to HuggingFace", self.model, reason)
        self.disabled_reason = reason

    # -- answering ----------------------------------------------------------------------------

    def answer(
        self, tokenizer: AcceleratedTokenizerMixin, texts: list[str], add_special_tokens: bool, limit: int | None
    ) -> list[list[int]] | None:
        """Ids for plain texts, or None after recording why HuggingFace must answer the call.

        limit: the most ids a text may have (truncation requested); a call in which any text
        would be cut goes to HuggingFace, which truncates on the tokenizer's side.
        """
        if fingerprint(tokenizer) != self.fingerprint:
            self.build(tokenizer)
        if self.disabled_reason is not None:
            self.record_fallback(FallbackReason.FAST_PATH_DISABLED, texts=len(texts))
            return None
        affixes = self.special_affixes
        if add_special_tokens and affixes is None:
            self.record_fallback(FallbackReason.POST_PROCESSOR, texts=len(texts))
            return None
        try:
            cache = self.segment_cache
            if cache is not None and cache.consulted(len(texts)):
                ids = self._route_segments(tokenizer, texts, cache)
            else:
                ids = self._route(tokenizer, texts)
        except Exception as error:
            # Bad input (a lone surrogate, say) must fail exactly as HuggingFace fails on it.
            reason = FallbackReason.BACKEND_ERROR if all(map(_is_valid_text, texts)) else FallbackReason.BAD_INPUT
            self.record_fallback(reason, error, texts=len(texts))
            return None
        if add_special_tokens and (affixes[0] or affixes[1]):
            prefix, suffix = affixes
            ids = [prefix + sequence + suffix for sequence in ids]
        if limit is not None and any(len(sequence) > limit for sequence in ids):
            self.record_fallback(FallbackReason.TRUNCATION, f"more than max_length={limit} ids", texts=len(texts))
            return None
        return ids

    def _route_segments(self, tokenizer: AcceleratedTokenizerMixin, texts: list[str], cache: SegmentCache) -> list[list[int]]:
        """Ids assembled from cached pieces; the misses of every text encoded in one call."""
        splitter = self.splitter
        found_under = [cache.prefix_of(text, splitter) for text in texts]
        heads = [entry if entry is not None and entry.chunks is not None else None for entry in found_under]
        split = [splitter.split(text, head.chars) if head else splitter.split(text) for text, head in zip(texts, heads)]
        # characters answered by the memo or the cache, or extending a remembered request
        reused_chars = sum(entry.chars for entry in found_under if entry is not None)
        found: dict[str | Piece, list[int]] = {}
        missing: dict[str | Piece, None] = {}
        repeated: set[str | Piece] = set()  # missed pieces that occur more than once in the call
        for parts in split:
            for part in parts:
                if type(part) is int:
                    continue
                if part in found:  # a second occurrence in this call (a burst's system prompt)
                    reused_chars += len(part)
                elif part in missing:
                    repeated.add(part)
                    reused_chars += len(part)
                elif (ids := cache.get(part)) is None:
                    missing[part] = None
                else:
                    found[part] = ids
                    reused_chars += len(part)
        cache.note_reuse(len(texts), reused_chars, sum(map(len, texts)))
        guarded: set[str | Piece] = set()
        exclusive: set[str | Piece] = set()
        if missing:
            pieces = list(missing)
            encoded, guarded_indexes = self._encode_guarded(tokenizer, [text_of(piece) for piece in pieces], one_by_one=True)
            found.update(zip(pieces, encoded))
            # HF's ids of a guarded piece are its share of HF's ids of the text; not cached
            guarded = {pieces[index] for index in guarded_indexes}
            stored = cache.put_many(((piece, ids) for piece, ids in zip(pieces, encoded) if piece not in guarded), repeated)
            # Pieces encoded by this call, not stored (so never seen by another thread) and in no
            # other text of it: their lists are handed out as they are, with no copy.
            exclusive = missing.keys() - stored - repeated
        # whether HF answered some piece of each text (then it is counted as such, and not remembered)
        via_hf = [bool(guarded) and any(part in guarded for part in parts if type(part) is not int) for parts in split]
        results = []
        for text, entry, head, parts, hf_answered in zip(texts, found_under, heads, split, via_hf):
            ids, reused, boundary = _assemble(parts, found, head, exclusive, splitter.lengths)
            results.append(ids)
            if boundary is not None and not hf_answered:
                # a request that extends none before it is remembered without its ids (no copy);
                # one that does (an agent's next turn) with them
                chunks = None if entry is None else (*(head.chunks if head else ()), ids[reused : boundary[1]])
                cache.remember(text, boundary[0], chunks, replaces=entry)
        answered_by_hf = sum(via_hf)
        if answered_by_hf:
            self.record_fallback(FallbackReason.UNICODE_GUARD, texts=answered_by_hf)
        if len(texts) > answered_by_hf:
            self.counters.record_fast(len(texts) - answered_by_hf)
        return results

    def _route(self, tokenizer: AcceleratedTokenizerMixin, texts: list[str]) -> list[list[int]]:
        """Backend ids, except for texts the lane's Unicode guard sends to HuggingFace (counted)."""
        ids, guarded = self._encode_guarded(tokenizer, texts)
        if guarded:
            self.record_fallback(FallbackReason.UNICODE_GUARD, texts=len(guarded))
        if len(texts) > len(guarded):  # only what the backend answered counts as fast
            self.counters.record_fast(len(texts) - len(guarded))
        return ids

    def _encode_guarded(
        self, tokenizer: AcceleratedTokenizerMixin, texts: list[str], one_by_one: bool = False
    ) -> tuple[list[list[int]], set[int]]:
        """(ids of each text, indexes of the texts the Unicode guard sent to HuggingFace): the
        lane's backend answers the others in one call (single-text lane for one, batch lane
        else), or, with `one_by_one` and at most `_FEW_TEXTS` texts, one single-lane call each."""
        few = len(texts) == 1 or (one_by_one and len(texts) <= _FEW_TEXTS)
        lane = self.routing.single if few else self.routing.batch
        guarded = {index for index, text in enumerate(texts) if lane.guard.needs_hf(text)}
        rest = [index for index in range(len(texts)) if index not in guarded]
        ids: list[list[int]] = [[] for _ in texts]
        if rest:
            if few:
                answered = [lane.backend.encode(texts[index]) for index in rest]
            else:
                answered = lane.backend.encode_batch([texts[index] for index in rest])
            for index, sequence in zip(rest, answered):
                ids[index] = sequence
        if guarded:
            order = sorted(guarded)
            for index, sequence in zip(order, tokenizer._hf_ids([texts[i] for i in order])):
                ids[index] = sequence
        return ids, guarded
