"""The split-surface tokenizer: plain-text encode on a fast backend, everything else on HuggingFace.

`accelerate()` returns an instance of a generated subclass of the tokenizer's own class, so
`isinstance` checks, `backend_tokenizer`, the vocabulary and every other attribute stay
HuggingFace's. The subclass overrides only the encode surface (`encode`, `_encode_plus`, which
`__call__` and `apply_chat_template(tokenize=True)` reach). Each call is either answered by the
backend, when it is plain text whose ids the backend provably gives exactly, or handed to
HuggingFace unchanged; every such hand-over is counted by reason and logged once per reason.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from tokbackend.backends import BackendUnavailableError, EncodeBackend, backend_factory
from tokbackend.backends.base import DEFAULT_CACHE_BUDGET_MIB
from tokbackend.cache import cache_dir
from tokbackend.guard import GuardUnavailableError, UnicodeGuard, load_guard
from tokbackend.models.qwen import builtin_name_of
from tokbackend.probe import ProbeMismatch, run_probe

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger("tokbackend")

# Set while HuggingFace itself needs `_encode_plus` to produce real `tokenizers.Encoding`s
# (e.g. `tokenize()` reads `.tokens()` from them); such calls are not encode traffic.
_hf_only = contextvars.ContextVar("tokbackend_hf_only", default=False)

# `_encode_plus` keyword arguments whose non-default values the fast path cannot reproduce.
_FLAGS_NEEDING_HF = (
    "return_overflowing_tokens",
    "return_special_tokens_mask",
    "return_offsets_mapping",
    "return_length",
    "is_split_into_words",
    "sanitize_control_tokens",
)
# Accepted with any value: they only affect warnings or paths the fast path never takes.
_HARMLESS_KWARGS = frozenset({"verbose", "stride", "padding_side", "max_length"})
# Every `_encode_plus` keyword `_fast_path_reason` knows; anything else goes to HuggingFace.
_KNOWN_KWARGS = frozenset(
    {
        "padding_strategy",
        "truncation_strategy",
        "return_tensors",
        "pad_to_multiple_of",
        "split_special_tokens",
        "return_token_type_ids",
        "return_attention_mask",
        *_FLAGS_NEEDING_HF,
        *_HARMLESS_KWARGS,
    }
)


# Fallback reasons that point at a problem rather than a documented hand-over (logged at WARNING).
PROBLEM_REASONS = frozenset({"backend_error"})


def _is_valid_text(text: str) -> bool:
    """UTF-8 encodable: no lone surrogates (which no tokenizer can encode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class FastPathError(RuntimeError):
    """`strict=True` and the backend disagreed with HuggingFace during the boot probe."""


class AccelerationStats:
    """Thread-safe counters of fast-path calls and of fallbacks to HuggingFace by reason."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fast_calls = 0
        self._fast_texts = 0
        self._fallbacks: Counter[str] = Counter()

    def record_fast(self, texts: int) -> None:
        with self._lock:
            self._fast_calls += 1
            self._fast_texts += texts

    def record_fallback(self, reason: str, model: str, backend: str, cause: BaseException | None = None) -> None:
        """Count a hand-over to HuggingFace; log the first of each reason: INFO for the routine
        ones (documented kwargs, the Unicode guard, bad input that HF rejects the same way),
        WARNING for a backend that failed on valid input."""
        with self._lock:
            first = reason not in self._fallbacks
            self._fallbacks[reason] += 1
        if first:
            logger.log(
                logging.WARNING if reason in PROBLEM_REASONS else logging.INFO,
                "%s encode for %s handed to HuggingFace (reason: %s%s); further calls with this reason "
                "are counted in tokenizer.tokbackend.stats() without logging",
                backend,
                model,
                reason,
                "" if cause is None else f": {type(cause).__name__}: {cause}",
            )

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "fast_calls": self._fast_calls,
                "fast_texts": self._fast_texts,
                "fallbacks": dict(self._fallbacks),
            }


class Acceleration:
    """What `accelerate()` attached to a tokenizer: its backend, probe result and stats.

    Reach it as `tokenizer.tokbackend`. The backend is rebuilt when tokens are added to the
    tokenizer (through any path) or its post-processor changes, so ids keep matching.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, backend_name: str, options: dict[str, Any]) -> None:
        self.backend_name = backend_name
        self.options = dict(options)
        name_or_path = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        self.model = builtin_name_of(name_or_path) or name_or_path
        self.stats_counter = AccelerationStats()
        self.disabled_reason: str | None = None
        self.probe_seconds = 0.0
        self._rebuild_lock = threading.Lock()
        self.backend: EncodeBackend | None = None
        self.guard = UnicodeGuard(frozenset())
        self.fingerprint: tuple[int, str] | None = None
        self.special_affixes: tuple[list[int], list[int]] | None = None

    @property
    def fast_path_enabled(self) -> bool:
        return self.disabled_reason is None

    def stats(self) -> dict[str, Any]:
        """Counters and state, e.g. `{"backend": "gigatoken", "fast_calls": 3, "fallbacks": {...}}`."""
        return {
            "backend": self.backend_name,
            "model": self.model,
            "fast_path_enabled": self.fast_path_enabled,
            "disabled_reason": self.disabled_reason,
            "probe_seconds": self.probe_seconds,
            "guarded_code_points": len(self.guard.code_points),
            "guard_record": self.guard.record.get("path"),
            **(self.backend.stats() if hasattr(self.backend, "stats") else {}),
            **self.stats_counter.snapshot(),
        }

    def __repr__(self) -> str:
        state = "on" if self.fast_path_enabled else f"off ({self.disabled_reason})"
        return f"Acceleration(backend={self.backend_name!r}, model={self.model!r}, fast_path={state})"


def _fingerprint(tokenizer: PreTrainedTokenizerBase) -> tuple[int, str]:
    """Cheap identity of what the backend was built from: vocab size with added tokens
    (0.5 us) and the post-processor's serialized form (which is what adds BOS/EOS)."""
    rust = tokenizer._tokenizer
    post_processor = rust.post_processor
    return rust.get_vocab_size(with_added_tokens=True), "" if post_processor is None else str(post_processor.__getstate__())


class AcceleratedTokenizerMixin:
    """Overrides the encode surface of a HuggingFace fast tokenizer; see the module docstring."""

    _tokbackend_original_class: type
    _tokbackend: Acceleration

    @property
    def tokbackend(self) -> Acceleration:
        """The acceleration state: `tokenizer.tokbackend.stats()` reads the counters."""
        return self._tokbackend

    # -- the encode surface ------------------------------------------------------------------

    def encode(self, text, text_pair=None, add_special_tokens=True, padding=False, truncation=None, max_length=None, **kwargs):
        if (
            isinstance(text, str)
            and text_pair is None
            and padding is False
            and truncation is None
            and max_length is None
            and not kwargs
            and not self.split_special_tokens
            and not _hf_only.get()
        ):
            ids = self._tokbackend_encode([text], add_special_tokens)
            if ids is None:  # already counted: HuggingFace answers without a second decision
                token = _hf_only.set(True)
                try:
                    return super().encode(text, add_special_tokens=add_special_tokens)
                finally:
                    _hf_only.reset(token)
            self._eventual_warn_about_too_long_sequence(ids[0], None, True)
            return ids[0]
        # Everything else goes through `_encode_plus`, which decides and counts.
        return super().encode(text, text_pair, add_special_tokens, padding, truncation, max_length, **kwargs)

    def _encode_plus(self, text, text_pair=None, add_special_tokens=True, **kwargs):
        if _hf_only.get():
            return super()._encode_plus(text, text_pair, add_special_tokens, **kwargs)
        reason = self._fast_path_reason(text, text_pair, kwargs)
        if reason is None:
            texts = [text] if isinstance(text, str) else list(text)
            ids = self._tokbackend_encode(texts, add_special_tokens)
            if ids is not None:
                return self._batch_encoding(text, ids, kwargs)
        else:
            self._tokbackend.stats_counter.record_fallback(reason, self._tokbackend.model, self._tokbackend.backend_name)
        return super()._encode_plus(text, text_pair, add_special_tokens, **kwargs)

    def tokenize(self, *args, **kwargs):
        # HF's tokenize() reads token strings off `tokenizers.Encoding` objects, which only
        # HuggingFace's own encode produces; it is not part of the accelerated surface.
        token = _hf_only.set(True)
        try:
            return super().tokenize(*args, **kwargs)
        finally:
            _hf_only.reset(token)

    def _fast_path_reason(self, text, text_pair, kwargs: dict[str, Any]) -> str | None:
        """None when the backend may answer this `_encode_plus` call, else why not."""
        from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

        plain_texts = isinstance(text, (list, tuple)) and text and all(isinstance(item, str) for item in text)
        if not (isinstance(text, str) or plain_texts):
            return "non_text_input"
        if text_pair is not None:
            return "text_pair"
        if kwargs.get("padding_strategy", PaddingStrategy.DO_NOT_PAD) != PaddingStrategy.DO_NOT_PAD:
            return "padding"
        if kwargs.get("truncation_strategy", TruncationStrategy.DO_NOT_TRUNCATE) != TruncationStrategy.DO_NOT_TRUNCATE:
            return "truncation"
        if kwargs.get("return_tensors") is not None:
            return "return_tensors"
        if kwargs.get("pad_to_multiple_of") is not None:
            return "pad_to_multiple_of"
        split_special_tokens = kwargs.get("split_special_tokens")
        if split_special_tokens or (split_special_tokens is None and self.split_special_tokens):
            return "split_special_tokens"
        return_token_type_ids = kwargs.get("return_token_type_ids")
        if return_token_type_ids or (return_token_type_ids is None and "token_type_ids" in self.model_input_names):
            return "return_token_type_ids"
        for flag in _FLAGS_NEEDING_HF:
            if kwargs.get(flag):
                return flag
        unknown = sorted(key for key in kwargs if key not in _KNOWN_KWARGS)
        if unknown:
            return f"unknown_kwarg:{unknown[0]}"
        return None

    def _batch_encoding(self, text, ids: list[list[int]], kwargs: dict[str, Any]):
        from transformers.tokenization_utils_base import BatchEncoding

        verbose = kwargs.get("verbose", True)
        for sequence in ids:
            self._eventual_warn_about_too_long_sequence(sequence, None, verbose)
        return_attention_mask = kwargs.get("return_attention_mask")
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        single = isinstance(text, str)
        data: dict[str, Any] = {"input_ids": ids[0] if single else ids}
        if return_attention_mask:
            data["attention_mask"] = [1] * len(ids[0]) if single else [[1] * len(sequence) for sequence in ids]
        return BatchEncoding(data)

    def _tokbackend_encode(self, texts: list[str], add_special_tokens: bool) -> list[list[int]] | None:
        """Backend ids for plain texts, or None after recording why HuggingFace must answer."""
        acceleration = self._tokbackend
        if acceleration.disabled_reason is not None:
            acceleration.stats_counter.record_fallback("fast_path_disabled", acceleration.model, acceleration.backend_name)
            return None
        if _fingerprint(self) != acceleration.fingerprint:
            _rebuild_backend(self, acceleration)
            if acceleration.disabled_reason is not None:
                return self._tokbackend_encode(texts, add_special_tokens)
        affixes = acceleration.special_affixes
        if add_special_tokens and affixes is None:
            acceleration.stats_counter.record_fallback("post_processor", acceleration.model, acceleration.backend_name)
            return None
        try:
            ids = self._tokbackend_route(texts, acceleration)
        except Exception as error:
            # Bad input (a lone surrogate, say) must fail exactly as HuggingFace fails on it.
            reason = "bad_input" if not all(_is_valid_text(text) for text in texts) else "backend_error"
            acceleration.stats_counter.record_fallback(reason, acceleration.model, acceleration.backend_name, error)
            return None
        if add_special_tokens and (affixes[0] or affixes[1]):
            prefix, suffix = affixes
            ids = [prefix + sequence + suffix for sequence in ids]
        return ids

    def _tokbackend_route(self, texts: list[str], acceleration: Acceleration) -> list[list[int]]:
        """Backend ids, except for texts the Unicode guard sends to HuggingFace (counted)."""
        backend, guard = acceleration.backend, acceleration.guard
        guarded = [index for index, text in enumerate(texts) if guard.needs_hf(text)]
        if not guarded:
            ids = [backend.encode(texts[0])] if len(texts) == 1 else backend.encode_batch(texts)
            acceleration.stats_counter.record_fast(len(texts))
            return ids
        for _ in guarded:
            acceleration.stats_counter.record_fallback("unicode_guard", acceleration.model, acceleration.backend_name)
        hf_ids = dict(zip(guarded, self._hf_ids([texts[index] for index in guarded])))
        rest = [index for index in range(len(texts)) if index not in hf_ids]
        fast_ids = dict(zip(rest, backend.encode_batch([texts[index] for index in rest]))) if rest else {}
        if rest:  # only what the backend answered counts as fast
            acceleration.stats_counter.record_fast(len(rest))
        return [hf_ids[index] if index in hf_ids else fast_ids[index] for index in range(len(texts))]

    # -- the HuggingFace reference, bypassing the overrides ----------------------------------

    def _hf_ids(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        """HuggingFace's own ids for plain texts (the reference the backend must match)."""
        token = _hf_only.set(True)
        try:
            return super()._encode_plus(list(texts), None, add_special_tokens, split_special_tokens=False)["input_ids"]
        finally:
            _hf_only.reset(token)

    # -- copies: pickle, deepcopy ------------------------------------------------------------

    def _tokbackend_plain_copy(self) -> PreTrainedTokenizerBase:
        """A shallow copy of the HuggingFace tokenizer underneath, without acceleration."""
        plain = object.__new__(self._tokbackend_original_class)
        plain.__dict__.update({key: value for key, value in self.__dict__.items() if key != "_tokbackend"})
        return plain

    def __reduce__(self):
        acceleration = self._tokbackend
        return (_restore, (self._tokbackend_plain_copy(), acceleration.backend_name, acceleration.options))

    def __deepcopy__(self, memo):
        plain = copy.deepcopy(self._tokbackend_plain_copy(), memo)
        acceleration = self._tokbackend
        # The backend is immutable once built, so the copy can share it instead of reloading.
        return _attach(plain, acceleration.backend_name, acceleration.options, share_from=acceleration)


def _restore(plain: PreTrainedTokenizerBase, backend_name: str, options: dict[str, Any]) -> PreTrainedTokenizerBase:
    return accelerate(plain, backend=backend_name, **options)


_class_lock = threading.Lock()
_accelerated_classes: dict[type, type] = {}


def accelerated_class(original: type) -> type:
    """The generated subclass of `original` that overrides only the encode surface.

    It keeps the original's name, so code that reads `type(tokenizer).__name__` (and
    `save_pretrained`, which records it) sees what it always saw.
    """
    with _class_lock:
        generated = _accelerated_classes.get(original)
        if generated is None:
            generated = type(
                original.__name__,
                (AcceleratedTokenizerMixin, original),
                {
                    "__module__": original.__module__,
                    "__qualname__": original.__qualname__,
                    "_tokbackend_original_class": original,
                },
            )
            _accelerated_classes[original] = generated
        return generated


def _special_token_affixes(tokenizer: AcceleratedTokenizerMixin) -> tuple[list[int], list[int]] | None:
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


def _rebuild_backend(tokenizer: AcceleratedTokenizerMixin, acceleration: Acceleration) -> None:
    """(Re)build the backend for the tokenizer's current state and probe it against HF."""
    with acceleration._rebuild_lock:
        fingerprint = _fingerprint(tokenizer)
        if fingerprint == acceleration.fingerprint:
            return  # another thread rebuilt it while we waited
        factory = backend_factory(acceleration.backend_name)
        tokenizer_json = tokenizer.backend_tokenizer.to_str()
        backend = factory(tokenizer_json, cache_budget_mib=acceleration.options.get("cache_budget_mib"))
        acceleration.special_affixes = _special_token_affixes(tokenizer)
        guard_mode = (
            acceleration.options.get("unicode_guard", "derive") if getattr(backend, "needs_unicode_guard", True) else "off"
        )
        try:
            acceleration.guard = load_guard(
                tokenizer_json,
                getattr(backend, "guard_family", acceleration.backend_name),
                tuple(getattr(backend, "versioned_libraries", ())),
                lambda text: factory(text, cache_budget_mib=None, warm=False),
                guard_mode,
                cache_dir(),
            )
        except GuardUnavailableError as error:
            if acceleration.options.get("strict"):
                raise FastPathError(f"tokbackend: {acceleration.model}: {error}") from error
            logger.error("%s: %s; the fast path is off and every encode goes to HuggingFace", acceleration.model, error)
            acceleration.disabled_reason = str(error)
        else:
            _probe_and_publish(tokenizer, acceleration, backend)
        acceleration.backend = backend
        acceleration.fingerprint = fingerprint


def _probe_and_publish(tokenizer: AcceleratedTokenizerMixin, acceleration: Acceleration, backend: EncodeBackend) -> None:
    acceleration.disabled_reason = None
    if not acceleration.options.get("probe", True):
        return
    result = run_probe(backend, tokenizer, acceleration.guard)
    acceleration.probe_seconds = result.seconds
    if result.mismatch is None:
        return
    mismatch: ProbeMismatch = result.mismatch
    message = (
        f"tokbackend: backend {acceleration.backend_name!r} disagrees with HuggingFace for {acceleration.model} on "
        f"{mismatch.text!r} (first difference at index {mismatch.first_difference}: backend {mismatch.backend_ids[:12]}, "
        f"HF {mismatch.hf_ids[:12]}); the fast path is off and every encode goes to HuggingFace"
    )
    if acceleration.options.get("strict"):
        raise FastPathError(message + " (strict=True)")
    logger.error(message.removeprefix("tokbackend: "))
    acceleration.disabled_reason = f"probe mismatch on {mismatch.text!r}"


def _attach(
    tokenizer: PreTrainedTokenizerBase,
    backend_name: str,
    options: dict[str, Any],
    share_from: Acceleration | None = None,
) -> PreTrainedTokenizerBase:
    accelerated = copy.copy(tokenizer)
    accelerated.__class__ = accelerated_class(type(tokenizer))
    acceleration = Acceleration(accelerated, backend_name, options)
    accelerated._tokbackend = acceleration
    if share_from is not None and share_from.fingerprint == _fingerprint(accelerated):
        acceleration.backend = share_from.backend
        acceleration.fingerprint = share_from.fingerprint
        acceleration.special_affixes = share_from.special_affixes
        acceleration.guard = share_from.guard
        acceleration.disabled_reason = share_from.disabled_reason
        return accelerated
    try:
        _rebuild_backend(accelerated, acceleration)
    except BackendUnavailableError as error:
        message = f"tokbackend: backend {backend_name!r} cannot serve {acceleration.model}: {error}"
        if not options.get("allow_hf_fallback"):
            raise BackendUnavailableError(
                message + " (pass allow_hf_fallback=True to serve it with HuggingFace instead)"
            ) from error
        logger.error("%s; serving with HuggingFace because allow_hf_fallback=True", message.removeprefix("tokbackend: "))
        acceleration.disabled_reason = f"backend unavailable: {error}"
        acceleration.fingerprint = _fingerprint(accelerated)
    return accelerated


def accelerate(
    tokenizer: PreTrainedTokenizerBase,
    backend: str = "gigatoken",
    *,
    strict: bool = False,
    probe: bool = True,
    allow_hf_fallback: bool = False,
    unicode_guard: str = "derive",
    cache_budget_mib: int | None = DEFAULT_CACHE_BUDGET_MIB,
) -> PreTrainedTokenizerBase:
    """Return a copy of `tokenizer` whose plain-text encode runs on `backend`.

    The copy is an instance of a subclass of the tokenizer's own class; hand it to any consumer
    of the original. The original is left as it was (the two share HuggingFace's Rust state,
    so tokens added through either are seen by both; the copy's backend follows).

    strict: raise `FastPathError` when the boot probe finds a mismatch, instead of logging an
        error and serving every encode from HuggingFace.
    probe: run the boot probe (edge strings compared with HuggingFace) when the backend is built.
    allow_hf_fallback: when the backend cannot load this tokenizer, log and serve with
        HuggingFace instead of raising `BackendUnavailableError`.
    unicode_guard: how to get the set of code points on which the backend diverges from
        HuggingFace when no record matches the installed versions: "derive" (scan every code
        point once, ~45 s on 2 cores, then cached), "refuse" (fast path off, logged; an error
        with strict=True), or "off" (no guard: only for backends known to be exact).
    cache_budget_mib: how far the backend's encode caches may grow the process's resident memory
        before they are renewed (gigatoken 0.10.0 never evicts on its own); None: unbounded.

    >>> fast = accelerate(AutoTokenizer.from_pretrained("Qwen/Qwen3-8B"))  # doctest: +SKIP
    >>> fast.encode("hello") == original.encode("hello")  # doctest: +SKIP
    True
    """
    from transformers import PreTrainedTokenizerBase

    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise TypeError(f"accelerate() takes a transformers tokenizer, got {type(tokenizer).__name__}")
    if isinstance(tokenizer, AcceleratedTokenizerMixin):
        tokenizer = tokenizer._tokbackend_plain_copy()
    if getattr(tokenizer, "_tokenizer", None) is None or not getattr(tokenizer, "is_fast", False):
        model = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise BackendUnavailableError(
            f"tokbackend: {model} is loaded as a slow (Python) tokenizer {type(tokenizer).__name__}; "
            "accelerate() needs a fast tokenizer (load it with use_fast=True)"
        )
    backend_factory(backend)  # fail early, with the list of known names, on a typo
    if unicode_guard not in ("derive", "refuse", "off"):
        raise ValueError(f'unicode_guard must be "derive", "refuse" or "off", got {unicode_guard!r}')
    options = {
        "strict": strict,
        "probe": probe,
        "allow_hf_fallback": allow_hf_fallback,
        "unicode_guard": unicode_guard,
        "cache_budget_mib": cache_budget_mib,
    }
    return _attach(tokenizer, backend, options)
