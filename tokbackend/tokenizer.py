"""The HuggingFace-facing side: `accelerate()` and the class it generates.

`accelerate()` returns an instance of a generated subclass of the tokenizer's own class, so
`isinstance` checks, `backend_tokenizer`, the vocabulary and every other attribute stay
HuggingFace's. The subclass overrides the encode surface: `_encode_plus`, which `__call__`,
`encode` and `apply_chat_template(tokenize=True)` reach, and `encode` itself for its common
form. In both, `tokbackend.policy` decides whether the backend may answer, `tokbackend.state`
answers, and anything else is handed to HuggingFace unchanged, counted by reason and logged once
per reason.
"""

from __future__ import annotations

import contextvars
import copy
import sys
from typing import TYPE_CHECKING, Any

from tokbackend.backends import BackendUnavailableError
from tokbackend.backends.forking import fork_safe_lock
from tokbackend.options import AccelerationOptions
from tokbackend.policy import FallbackReason, TokenizerDefaults, fast_path_reason, length_limit, unknown_kwargs
from tokbackend.state import AccelerationState

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# Set while HuggingFace itself must produce real `tokenizers.Encoding`s (e.g. `tokenize()`
# reads `.tokens()` from them, and the reference ids the probe compares against); such calls
# are not encode traffic.
_hf_only = contextvars.ContextVar("tokbackend_hf_only", default=False)


class AcceleratedTokenizerMixin:
    """Overrides the encode surface of a HuggingFace fast tokenizer; see the module docstring."""

    _tokbackend_original_class: type
    _tokbackend: AccelerationState

    @property
    def tokbackend(self) -> AccelerationState:
        """The acceleration state: `tokenizer.tokbackend.stats()` reads the counters."""
        return self._tokbackend

    def encode(self, text, text_pair=None, add_special_tokens=True, padding=False, truncation=None, max_length=None, **kwargs):
        # The common call, `encode(text)`, asks the same policy without HF's BatchEncoding round
        # trip (~0.1 ms for a 32k-token prompt); every other call goes through `_encode_plus`.
        if padding is False and truncation in (None, False) and max_length is None and not kwargs and not _hf_only.get():
            state = self._tokbackend
            defaults = TokenizerDefaults(self.split_special_tokens, "token_type_ids" in self.model_input_names)
            if fast_path_reason(text, text_pair, {}, defaults) is None and isinstance(text, str):
                ids = state.answer(self, [text], add_special_tokens, None)
                if ids is not None:
                    self._eventual_warn_about_too_long_sequence(ids[0], None, True)
                    return ids[0]
                token = _hf_only.set(True)  # the hand-over is counted already
                try:
                    return super().encode(text, text_pair, add_special_tokens)
                finally:
                    _hf_only.reset(token)
        return super().encode(text, text_pair, add_special_tokens, padding, truncation, max_length, **kwargs)

    def _encode_plus(self, text, text_pair=None, add_special_tokens=True, **kwargs):
        if _hf_only.get():
            return super()._encode_plus(text, text_pair, add_special_tokens, **kwargs)
        state = self._tokbackend
        defaults = TokenizerDefaults(self.split_special_tokens, "token_type_ids" in self.model_input_names)
        reason = fast_path_reason(text, text_pair, kwargs, defaults)
        if reason is None:
            texts = [text] if isinstance(text, str) else list(text)
            ids = state.answer(self, texts, add_special_tokens, length_limit(kwargs))
            if ids is not None:
                return self._batch_encoding(text, ids, kwargs)
        else:
            detail = ", ".join(unknown_kwargs(kwargs)) if reason is FallbackReason.UNKNOWN_KWARG else None
            state.record_fallback(reason, detail)
        token = _hf_only.set(True)
        try:
            return super()._encode_plus(text, text_pair, add_special_tokens, **kwargs)
        finally:
            _hf_only.reset(token)

    def tokenize(self, *args, **kwargs):
        # HF's tokenize() reads token strings off `tokenizers.Encoding` objects, which only
        # HuggingFace's own encode produces; it is not part of the accelerated surface.
        token = _hf_only.set(True)
        try:
            return super().tokenize(*args, **kwargs)
        finally:
            _hf_only.reset(token)

    def _batch_encoding(self, text, ids: list[list[int]], kwargs: dict[str, Any]):
        from transformers.tokenization_utils_base import BatchEncoding

        verbose = kwargs.get("verbose", True)
        for sequence in ids:
            self._eventual_warn_about_too_long_sequence(sequence, kwargs.get("max_length"), verbose)
        return_attention_mask = kwargs.get("return_attention_mask")
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        single = isinstance(text, str)
        data: dict[str, Any] = {"input_ids": ids[0] if single else ids}
        if return_attention_mask:
            data["attention_mask"] = [1] * len(ids[0]) if single else [[1] * len(sequence) for sequence in ids]
        return BatchEncoding(data)

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
        # Another process builds its own backend (nothing Rust-side crosses a pickle).
        return (_restore, (self._tokbackend_plain_copy(), self._tokbackend.options))

    def __copy__(self):
        # A shallow copy shares HF's Rust tokenizer, so it shares the acceleration state too:
        # no second backend load (vLLM copies the tokenizer twice while building its renderer).
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone

    def __deepcopy__(self, memo):
        plain = copy.deepcopy(self._tokbackend_plain_copy(), memo)
        clone = _attach(plain, self._tokbackend.options, share_from=self._tokbackend)
        # Keep classes layered on top of the generated one (vLLM's cached tokenizer class).
        clone.__class__ = type(self)
        return clone


def _restore(plain: PreTrainedTokenizerBase, options: AccelerationOptions) -> PreTrainedTokenizerBase:
    return accelerate(plain, options=options)


_class_lock = fork_safe_lock(sys.modules[__name__], "_class_lock")
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


def _attach(
    tokenizer: PreTrainedTokenizerBase, options: AccelerationOptions, share_from: AccelerationState | None = None
) -> PreTrainedTokenizerBase:
    from tokbackend.state import fingerprint

    accelerated = copy.copy(tokenizer)
    accelerated.__class__ = accelerated_class(type(tokenizer))
    state = AccelerationState(accelerated, options)
    accelerated._tokbackend = state
    if share_from is not None and share_from.fingerprint == fingerprint(accelerated):
        # The backends are immutable once built, so a copy shares them (and the counters).
        state.share_from(share_from)
    else:
        state.build(accelerated)
    return accelerated


def accelerate(
    tokenizer: PreTrainedTokenizerBase,
    backend: str | None = None,
    *,
    options: AccelerationOptions | None = None,
    **changes: Any,
) -> PreTrainedTokenizerBase:
    """Return a copy of `tokenizer` whose plain-text encode runs on a fast backend.

    `backend` and keyword `changes` override fields of `options` (default `AccelerationOptions()`,
    whose docstring lists them: backend, strict, probe, allow_hf_fallback, unicode_guard,
    cache_budget_mib). The copy is an instance of a subclass of the tokenizer's own class; hand
    it to any consumer of the original. The original is left as it was (the two share
    HuggingFace's Rust state, so tokens added through either are seen by both; the copy's
    backend follows).

    >>> fast = accelerate(AutoTokenizer.from_pretrained("Qwen/Qwen3-8B"))  # doctest: +SKIP
    >>> fast.encode("hello") == original.encode("hello")  # doctest: +SKIP
    True
    >>> fast.tokbackend.stats()["routing"]  # doctest: +SKIP
    {'single': 'fastokens', 'batch': 'fastokens', 'reason': 'on 16 cores: one text fastokens 1.97 ms, ...'}
    """
    from transformers import PreTrainedTokenizerBase

    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise TypeError(f"accelerate() takes a transformers tokenizer, got {type(tokenizer).__name__}")
    options = options or AccelerationOptions()
    if backend is not None:
        changes["backend"] = backend
    if changes:
        options = options.replace(**changes)
    if isinstance(tokenizer, AcceleratedTokenizerMixin):
        tokenizer = tokenizer._tokbackend_plain_copy()
    if getattr(tokenizer, "_tokenizer", None) is None or not getattr(tokenizer, "is_fast", False):
        model = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise BackendUnavailableError(
            f"tokbackend: {model} is loaded as a slow (Python) tokenizer {type(tokenizer).__name__}; "
            "accelerate() needs a fast tokenizer (load it with use_fast=True)"
        )
    return _attach(tokenizer, options)
