"""The acceleration state of one tokenizer (`tokenizer.tokbackend`): the build it serves with, and its counters.

A new build and the tokenizer's fingerprint are swapped in with one assignment; a call reads them
once, so it finishes on the build it started with.
"""

from __future__ import annotations

from array import array
from typing import Any, TypeAlias, cast

from tokbackend._build import UNBUILT, Build, build_for
from tokbackend._errors import TokbackendError
from tokbackend._guard import UnicodeGuard
from tokbackend._options import AccelerationOptions
from tokbackend._policy import FallbackReason, Truncation
from tokbackend._process.forking import fork_safe_lock
from tokbackend._reference import Reference
from tokbackend._routing import Routing
from tokbackend._segments import encode_through_cache
from tokbackend._stats import AccelerationStats, Stats
from tokbackend.backends import EncodeBackend
from tokbackend.backends._base import is_error

_NO_GUARD = UnicodeGuard(frozenset())
BatchIds: TypeAlias = "list[list[int]] | list[array[int]]"


class AccelerationState:
    """See the module docstring."""

    def __init__(self, model: str, options: AccelerationOptions) -> None:
        self.options = options
        self.model = model
        # imported here, not with the package: see its docstring
        from tokbackend._metrics import METRICS

        self.metrics = METRICS  # None without prometheus_client
        self.counters = AccelerationStats(METRICS)
        # the build served, and the fingerprint of the tokenizer state it was last found right for
        self._serving: tuple[Build, object] = (UNBUILT, None)
        self._rebuild_lock = fork_safe_lock(self, "_rebuild_lock")

    @property
    def build(self) -> Build:
        """The build serving calls now (immutable; a rebuild replaces it)."""
        return self._serving[0]

    @property
    def serving(self) -> tuple[Build, object]:
        """The build serving calls now and the tokenizer fingerprint it was last found right for."""
        return self._serving

    @property
    def fast_path_enabled(self) -> bool:
        return self.build.disabled_reason is None

    @property
    def disabled_reason(self) -> str | None:
        return self.build.disabled_reason

    @property
    def routing(self) -> Routing | None:
        return self.build.routing

    @property
    def backend(self) -> EncodeBackend | None:
        routing = self.build.routing
        return None if routing is None else routing.lane.backend

    @property
    def guard(self) -> UnicodeGuard:
        routing = self.build.routing
        return _NO_GUARD if routing is None else routing.lane.guard

    def stats(self) -> Stats:
        """What serves this tokenizer and the counters (`Stats`: read-only, also a mapping)."""
        build, guard = self.build, self.guard
        routing, segments = build.routing, build.segments
        segment_cache: dict[str, Any] = {"enabled": segments is not None and segments.caches}
        if segments is not None and segments.caches:
            segment_cache.update(segments.cache.stats())
        elif self.options.segment_cache_mib is not None:  # on, and this tokenizer's pipeline has no use for it
            segment_cache["unsupported"] = build.segments_unsupported
        return Stats(
            backend=routing.lane.name if routing is not None and build.disabled_reason is None else "hf",
            backend_option=self.options.backend,
            model=self.model,
            fast_path_enabled=build.disabled_reason is None,
            disabled_reason=build.disabled_reason,
            routing=None if routing is None else routing.describe(),
            probe_seconds=build.probe_seconds,
            guarded_code_points=len(guard.code_points),
            guard_record=guard.record.get("path"),
            guard=guard.source(),
            segment_cache=segment_cache,
            start_up={"phase": build.phase},
            backend_stats={} if routing is None else routing.lane.backend.stats(),
            **self.counters.snapshot(),
        )

    def describe(self) -> str:
        """One line for start-up logs: backend, routing and why, guard, probe."""
        build = self.build
        routing = build.routing
        if routing is None or build.disabled_reason is not None:
            return f"backend {self.options.backend}, fast path off ({build.disabled_reason})"
        guard = routing.lane.guard
        return (
            f"backend {self.options.backend} ({routing.lane.name}; {routing.reason}), "
            f"{len(guard.code_points)} guarded code points (guard {guard.source()}), probe "
            f"{build.probe_seconds * 1000:.0f} ms"
        )

    def __repr__(self) -> str:
        state = "on" if self.fast_path_enabled else f"off ({self.disabled_reason})"
        return f"AccelerationState(backend={self.options.backend!r}, model={self.model!r}, fast_path={state})"

    def record_fallback(self, reason: FallbackReason, cause: BaseException | str | None = None, texts: int = 1) -> None:
        self.counters.record_fallback(reason, self.model, self.options.backend, cause, texts)

    def share_from(self, other: AccelerationState, reference: Reference) -> None:
        """Serve with `other`'s build and counters (it serves the reference's content)."""
        with self._rebuild_lock:
            self._swap(other.build, reference.fingerprint())
            self.counters = other.counters

    def rebuild(self, reference: Reference, changed: bool = False) -> Build:
        """The build for the reference's current state (a new one where what a build is made from
        changed); `changed`: a backend that cannot serve turns the fast path off instead of raising."""
        with self._rebuild_lock:
            fingerprint = reference.fingerprint()
            build, seen = self._serving
            if fingerprint == seen:
                return build
            content = reference.content()
            if content != build.content:
                build = build_for(reference, self.options, content, changed=changed or build is not UNBUILT)
            self._swap(build, fingerprint)
        return build

    def _swap(self, build: Build, fingerprint: object) -> None:
        """The one place a state's build changes (under `_rebuild_lock`): a build for another state
        replaces any; one for the same state replaces only `UNBUILT`."""
        current = self._serving[0]
        if build is not current and current is not UNBUILT and build.content == current.content:
            raise TokbackendError(
                f"tokbackend: a build in phase {current.phase!r} cannot be replaced by one in phase {build.phase!r}"
            )
        self._serving = (build, fingerprint)

    def answer(
        self,
        reference: Reference,
        texts: list[str],
        add_special_tokens: bool,
        truncation: Truncation | None,
        arrays: bool = False,
    ) -> BatchIds | None:
        """Ids for plain texts (each an `array('q')` with `arrays`), or None after recording why
        HuggingFace must answer the call: a call in which `truncation` would cut a text, too."""
        build, seen = self._serving
        if reference.fingerprint() != seen:
            build = self.rebuild(reference)
        if build.disabled_reason is not None or build.routing is None:
            self.record_fallback(FallbackReason.FAST_PATH_DISABLED, texts=len(texts))
            return None
        affixes = build.affixes
        if add_special_tokens and affixes is None:
            self.record_fallback(FallbackReason.POST_PROCESSOR, texts=len(texts))
            return None
        if truncation is not None and _stride_rejected(truncation, build.special_tokens):
            self.record_fallback(
                FallbackReason.ARGUMENT_VALUE, f"stride {truncation.stride} too large", texts=len(texts)
            )
            return None
        ids: BatchIds
        unsplit = 0  # texts HF answers whole: only it splits them exactly
        try:
            segments, routing = build.segments, build.routing
            if build.added_tokens_to_hf is not None and any(map(build.added_tokens_to_hf, texts)):
                self.record_fallback(FallbackReason.ADDED_TOKENS, texts=len(texts))
                return None
            if segments is not None and (
                (segments.exact_split and segments.must_split(texts))
                or (segments.cache_may_help(texts, arrays) and segments.cache.consulted(len(texts)))
            ):
                ids, answered_by_hf, unsplit = encode_through_cache(
                    texts, segments.splitter, segments.cache, routing, reference.hf_ids, arrays
                )
            else:
                ids, guarded = routing.encode(texts, reference.hf_ids, arrays=arrays)
                answered_by_hf = len(guarded)
        except BaseException as error:  # an Exception, or a Rust panic in a backend that lets one out
            if not is_error(error):
                raise
            # Bad input (a lone surrogate, which no tokenizer can encode) must fail exactly as HF fails on it.
            try:
                "".join(texts).encode("utf-8")
                reason = FallbackReason.BACKEND_ERROR
            except UnicodeEncodeError:
                reason = FallbackReason.BAD_INPUT
            self.record_fallback(reason, error, texts=len(texts))
            return None
        if add_special_tokens and affixes is not None and (affixes[0] or affixes[1]):
            prefix, suffix = (array("q", affix) for affix in affixes) if arrays else affixes
            ids = [prefix + sequence + suffix for sequence in cast("list[Any]", ids)]  # both arrays, or both lists
        if truncation is not None and any(len(sequence) > truncation.max_length for sequence in ids):
            # HF answers the whole call: each text is counted there, once
            self.record_fallback(
                FallbackReason.TRUNCATION, f"more than max_length={truncation.max_length} ids", texts=len(texts)
            )
            return None
        if answered_by_hf:
            self.record_fallback(FallbackReason.UNICODE_GUARD, texts=answered_by_hf)
        if unsplit:
            self.record_fallback(FallbackReason.ADDED_TOKENS, texts=unsplit)
        if len(texts) > answered_by_hf + unsplit:  # only what the backend answered counts as fast
            self.counters.record_fast(len(texts) - answered_by_hf - unsplit, arrays)
        return ids


def _stride_rejected(truncation: Truncation, special_tokens: int) -> bool:
    """HF's Rust side rejects a stride above max_length less the special tokens (unsigned arithmetic)."""
    return truncation.max_length >= special_tokens and truncation.stride > truncation.max_length - special_tokens


__all__ = ["AccelerationState"]
