"""`accelerate()` and the class it generates: the only module that knows HuggingFace's classes.

The generated class subclasses the tokenizer's own and overrides `encode` and `_encode_plus`: where
`tokbackend._policy` allows, `tokbackend._state` answers; anything else goes to HF unchanged.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import enum
import functools
import threading
import types
import weakref
from array import array
from collections.abc import Callable, Hashable, Iterator
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

from tokbackend import _watch as watch
from tokbackend._build import Build
from tokbackend._lazy_encodings import lazy_batch_encoding
from tokbackend._models import builtin_name_of
from tokbackend._options import AccelerationOptions
from tokbackend._policy import KNOWN_KWARGS, FallbackReason, Truncation, fast_path_reason, truncation_of
from tokbackend._shared_settings import PLAIN, Settings, SettingsGate, apply, gate_of
from tokbackend._state import AccelerationState, BatchIds
from tokbackend._tokenizer_json import without_truncation_and_padding
from tokbackend.backends import BackendUnavailableError
from tokbackend.backends._arrays import ones_like

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer
    from transformers import BatchEncoding, PreTrainedTokenizerBase
    from transformers import PreTrainedTokenizerFast as _HFTokenizer
else:
    _HFTokenizer = object  # the generated class puts the tokenizer's own class after the mixin


class _Mode(enum.Enum):
    """The calls' mode in this context: fast-path ids as lists, as `array('q')`s, or HuggingFace's
    own answer (real `tokenizers.Encoding`s), which stays inside `ids_as_arrays`."""

    LISTS = "lists"
    ARRAYS = "arrays"
    HF = "hf"


_LISTS, _ARRAYS, _HF = _Mode.LISTS, _Mode.ARRAYS, _Mode.HF
_mode = contextvars.ContextVar("tokbackend_mode", default=_LISTS)


@contextlib.contextmanager
def _in_mode(mode: _Mode) -> Iterator[None]:
    """Calls inside run in `mode` (`_HF` stays: HuggingFace answers what it calls itself)."""
    token = _mode.set(_HF if _mode.get() is _HF else mode)
    try:
        yield
    finally:
        _mode.reset(token)


def ids_as_arrays() -> contextlib.AbstractContextManager[None]:
    """Plain-text encodes inside give `array('q')` ids and masks (what HuggingFace answers keeps its
    lists): only for a caller that converts every id sequence with `array("q", ids)` (SGLang)."""
    return _in_mode(_ARRAYS)


class AcceleratedTokenizerMixin(_HFTokenizer):
    """Overrides the encode surface of a HuggingFace fast tokenizer; see the module docstring."""

    _tokenizer: Tokenizer  # `accelerate()` takes only a tokenizer that has one
    _tokbackend_original_class: type[PreTrainedTokenizerBase]
    _tokbackend: AccelerationState
    _tokbackend_reference: HFReference
    _tokbackend_gate: SettingsGate

    @property
    def tokbackend(self) -> AccelerationState:
        """The acceleration state: `tokenizer.tokbackend.stats()` reads the counters."""
        return self._tokbackend

    def encode(
        self,
        text: Any,
        text_pair: Any = None,
        add_special_tokens: bool = True,
        padding: Any = False,
        truncation: Any = None,
        max_length: int | None = None,
        stride: int = 0,
        padding_side: str | None = None,
        return_tensors: Any = None,
        **kwargs: Any,
    ) -> Any:
        # `encode(text)` asks the policy directly for the ids alone, without HF's BatchEncoding
        # round trip; any other call takes HF's path, which checks its arguments and comes back
        # through `_encode_plus`.
        if (
            padding is False
            and (truncation is None or truncation is False)
            and max_length is None
            and return_tensors is None
            and not kwargs
            and type(text) is str
            and (mode := _mode.get()) is not _HF
        ):
            metrics = self._tokbackend.metrics  # None without prometheus_client: nothing timed
            started = perf_counter() if metrics is not None else 0.0
            ids = self._tokbackend_answer(text, text_pair, add_special_tokens, {}, mode is _ARRAYS, ids_only=True)
            if ids is not None:
                if len(ids[0]) > self.model_max_length:  # HF's warning (once) about a too long sequence
                    self._eventual_warn_about_too_long_sequence(ids[0], None, True)  # type: ignore[arg-type]  # HF reads its len()
                if metrics is not None:
                    metrics.fast_seconds(perf_counter() - started)
                return ids[0]
            with _in_mode(_HF):  # the hand-over is counted already
                answer = super().encode(text, text_pair, add_special_tokens, stride=stride, padding_side=padding_side)
            if metrics is not None:
                metrics.hf_seconds(perf_counter() - started)
            return answer
        return super().encode(
            text,
            text_pair,
            add_special_tokens,
            padding,
            truncation,
            max_length,
            stride,
            padding_side,
            return_tensors,
            **kwargs,
        )

    # HF passes the rest by keyword
    def _encode_plus(  # type: ignore[override]
        self, text: Any, text_pair: Any = None, add_special_tokens: bool = True, **kwargs: Any
    ) -> BatchEncoding:
        mode = _mode.get()
        if mode is _HF:  # a hand-over timed by its caller, or HF's own call (`tokenize`)
            metrics = None
        else:
            metrics = self._tokbackend.metrics  # None without prometheus_client: nothing timed
            started = perf_counter() if metrics is not None else 0.0
            arrays = mode is _ARRAYS and kwargs.get("return_tensors") is None
            ids = self._tokbackend_answer(text, text_pair, add_special_tokens, kwargs, arrays)
            if ids is not None:
                encoding = self._batch_encoding(text, ids, add_special_tokens, kwargs)
                if metrics is not None:
                    metrics.fast_seconds(perf_counter() - started)
                return encoding
        with (
            _in_mode(_HF),
            self._tokbackend_gate.entered(self._tokenizer, self._tokbackend_settings(kwargs), internal=False),
        ):
            encoding = super()._encode_plus(text, text_pair, add_special_tokens, **kwargs)
        if metrics is not None:
            metrics.hf_seconds(perf_counter() - started)
        return encoding

    def _tokbackend_settings(self, kwargs: dict[str, Any]) -> tuple[Hashable, ...]:
        """What HF's `set_truncation_and_padding` and `encode_special_tokens` read for this call
        (equal tuples leave the Rust tokenizer alike); the pad token only for a padding call, as
        HF reads it (reading an unset one logs an error)."""
        padding = kwargs.get("padding_strategy")
        pads = None
        if getattr(padding, "value", padding) not in (None, "do_not_pad"):
            pads = (self.padding_side, self.pad_token_id, self.pad_token, self.pad_token_type_id)
        return (
            tuple(kwargs.get(name) for name in _SETTINGS_KWARGS),
            self.truncation_side,
            pads,
            self.split_special_tokens,
        )

    def _tokbackend_answer(
        self,
        text: Any,
        text_pair: Any,
        add_special_tokens: bool,
        kwargs: dict[str, Any],
        arrays: bool,
        ids_only: bool = False,
    ) -> BatchIds | None:
        """The backend's ids for this call (`array('q')`s with `arrays`), or None after recording
        why HuggingFace answers it. `ids_only`: the caller (`encode`) returns no token type ids."""
        state = self._tokbackend
        returns_token_type_ids = not ids_only and "token_type_ids" in self.model_input_names
        side, split_special_tokens = self.truncation_side, self.split_special_tokens
        reason = fast_path_reason(
            text, text_pair, add_special_tokens, kwargs, split_special_tokens, returns_token_type_ids, side
        )
        if reason is not None:
            unknown = reason is FallbackReason.UNKNOWN_KWARG  # named in the log line
            count = _texts_in(text, kwargs.get("is_split_into_words"))  # each text counted once
            state.record_fallback(reason, ", ".join(sorted(kwargs.keys() - KNOWN_KWARGS)) if unknown else None, count)
            return None
        texts = [text] if type(text) is str else list(text)
        truncation = truncation_of(kwargs) if kwargs else None
        ids = state.answer(self._tokbackend_reference, texts, add_special_tokens, truncation, arrays)
        if ids is not None:  # the settings HF's call would have left on the Rust tokenizer
            gate = self._tokbackend_gate
            if truncation is not None:
                gate.answered(self._tokenizer, _settings_after(truncation, kwargs, side))
            elif gate.dirty:
                gate.answered(self._tokenizer, PLAIN)
        return ids

    def tokenize(self, *args: Any, **kwargs: Any) -> list[str]:
        # it reads token strings off `tokenizers.Encoding`s, which only HF's own encode makes
        with _in_mode(_HF):
            return super().tokenize(*args, **kwargs)

    def _batch_encoding(
        self, text: Any, ids: BatchIds, add_special_tokens: bool, kwargs: dict[str, Any]
    ) -> BatchEncoding:
        if ids and max(map(len, ids)) > self.model_max_length:  # HF's warning (once) about a too long sequence
            for sequence in ids:
                # HF reads the sequence's len()
                self._eventual_warn_about_too_long_sequence(
                    sequence,  # type: ignore[arg-type]
                    kwargs.get("max_length"),
                    kwargs.get("verbose", True),
                )
        return_attention_mask = kwargs.get("return_attention_mask")
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        single = type(text) is str
        data: dict[str, Any] = {"input_ids": ids[0] if single else ids}
        if return_attention_mask:
            # arrays in the array form: a mask of Python ints costs more than the rest of the call
            if ids and type(ids[0]) is array:
                data["attention_mask"] = ones_like(ids[0]) if single else list(map(ones_like, ids))
            else:
                data["attention_mask"] = [1] * len(ids[0]) if single else [[1] * len(sequence) for sequence in ids]
        # what the call saw: its texts (a list the caller may change later), settings and build
        seen = text if single else tuple(text)
        side, serving = self.truncation_side, self._tokbackend.serving
        compute = functools.partial(
            self._tokbackend_reference.hf_encodings, seen, add_special_tokens, kwargs, side, serving
        )
        return lazy_batch_encoding(data, compute)

    def _tokbackend_plain_copy(self) -> PreTrainedTokenizerBase:
        """A shallow copy of the HuggingFace tokenizer underneath, without acceleration."""
        plain = object.__new__(self._tokbackend_original_class)
        plain.__dict__.update({key: value for key, value in self.__dict__.items() if key not in _OUR_ATTRIBUTES})
        return plain

    def __reduce__(self) -> tuple[Callable[..., PreTrainedTokenizerBase], tuple[Any, ...]]:
        # Another process builds its own backend (nothing Rust-side crosses a pickle), serving HF's
        # tokenizer in whatever state it unpickles; `copied`: it hands HF a call it cannot serve.
        return (_attach, (self._tokbackend_plain_copy(), self._tokbackend.options, None, True))

    def __copy__(self) -> AcceleratedTokenizerMixin:
        # A shallow copy shares HF's Rust tokenizer, so it shares the acceleration state too (no
        # second backend load: vLLM copies the tokenizer twice).
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._tokbackend_reference = HFReference(clone, self._tokbackend_reference.model)
        clone._tokbackend_gate = gate_of(clone._tokenizer, clone)  # the same gate, one more user
        return clone

    def __deepcopy__(self, memo: dict[int, Any]) -> PreTrainedTokenizerBase:
        plain = copy.deepcopy(self._tokbackend_plain_copy(), memo)
        clone = _attach(plain, self._tokbackend.options, share_from=self._tokbackend, copied=True)
        # Keep classes layered on top of the generated one (vLLM's cached tokenizer class).
        clone.__class__ = type(self)
        return clone


_OUR_ATTRIBUTES = frozenset({"_tokbackend", "_tokbackend_reference", "_tokbackend_gate"})
# The `_encode_plus` keywords that decide the Rust tokenizer's settings during the call.
_SETTINGS_KWARGS = (
    "padding_strategy",
    "truncation_strategy",
    "max_length",
    "stride",
    "pad_to_multiple_of",
    "padding_side",
    "split_special_tokens",
)


class HFReference:
    """The `Reference` of one accelerated tokenizer, held weakly (a cycle would keep the backend alive
    until a full collection)."""

    __slots__ = ("_tokenizer_of", "model")

    def __init__(self, tokenizer: AcceleratedTokenizerMixin, model: str) -> None:
        self._tokenizer_of = weakref.ref(tokenizer)
        self.model = model

    @property
    def _tokenizer(self) -> AcceleratedTokenizerMixin:
        tokenizer = self._tokenizer_of()
        if tokenizer is None:  # only a caller that kept the reference and dropped the tokenizer
            raise ReferenceError("tokbackend: the accelerated tokenizer this reference belongs to is gone")
        return tokenizer

    def hf_ids(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        """HuggingFace's own ids for plain texts, leaving the Rust settings and length warning alone."""
        encoded = self._internal(list(texts), add_special_tokens, {"split_special_tokens": False}, ("ids",))
        return cast("list[list[int]]", encoded["input_ids"])

    def rust_ids(self, texts: list[str]) -> list[list[int]]:
        """The Rust tokenizer's ids for plain texts (no offsets: faster than `hf_ids`), settings left alone."""
        rust = self._tokenizer._tokenizer
        with _in_mode(_HF), self._tokenizer._tokbackend_gate.entered(rust, ("ids",), internal=True):
            apply(rust, PLAIN)  # what `hf_ids` asks of `_encode_plus`, which sets the same
            return [encoding.ids for encoding in rust.encode_batch_fast(list(texts), add_special_tokens=False)]

    def hf_encodings(
        self,
        text: Any,
        add_special_tokens: bool,
        kwargs: dict[str, Any],
        truncation_side: str,
        serving: tuple[Build, object],
    ) -> list[Encoding]:
        """HuggingFace's `tokenizers.Encoding`s for a fast-path call, of the state (`serving`) it saw."""
        build, fingerprint = serving
        tokenizer = self._tokenizer
        if self.fingerprint() == fingerprint or build.tokenizer_json is None:
            key = ("encodings", tokenizer._tokbackend_settings(kwargs))
            return cast("list[Encoding]", self._internal(text, add_special_tokens, kwargs, key).encodings)
        rust = _rust_as_built(build.tokenizer_json, threading.get_ident())
        apply(rust, _settings_after(truncation_of(kwargs) if kwargs else None, kwargs, truncation_side))
        return rust.encode_batch([text] if type(text) is str else list(text), add_special_tokens=add_special_tokens)

    def _internal(self, text: Any, add_special_tokens: bool, kwargs: dict[str, Any], key: Hashable) -> BatchEncoding:
        tokenizer = self._tokenizer
        with _in_mode(_HF), tokenizer._tokbackend_gate.entered(tokenizer._tokenizer, key, internal=True):
            return super(AcceleratedTokenizerMixin, tokenizer)._encode_plus(
                text, None, add_special_tokens, **{**kwargs, "verbose": False}
            )

    def tokenizer_json(self) -> str:
        # HF applies neither truncation nor padding to a plain encode: it resets both before every call
        return without_truncation_and_padding(self._tokenizer._tokenizer.to_str())

    def fingerprint(self) -> Hashable:
        tokenizer = self._tokenizer_of()  # read on every call: no property frame
        if tokenizer is None:
            return None  # gone: nothing to serve
        return watch.fingerprint(tokenizer._tokenizer, tokenizer)

    def content(self) -> Hashable:
        return watch.content(self._tokenizer._tokenizer)

    def added_tokens(self) -> list[str]:
        return [str(token) for token in self._tokenizer.added_tokens_decoder.values()]

    def special_tokens_count(self) -> int:
        return self._tokenizer._tokenizer.num_special_tokens_to_add(False)


def _texts_in(text: Any, is_split_into_words: Any) -> int:
    """How many texts (sequences) a call's input holds: a list of words is one where split into words."""
    if type(text) not in (list, tuple):
        return 1
    if is_split_into_words:
        return len(text) if text and type(text[0]) in (list, tuple) else 1
    return len(text)


def _settings_after(truncation: Truncation | None, kwargs: dict[str, Any], truncation_side: str) -> Settings:
    """The Rust settings HF's call leaves: plain, or its truncation without padding."""
    if truncation is None:
        return PLAIN
    strategy = kwargs["truncation_strategy"].value
    left = {
        "max_length": truncation.max_length,
        "stride": truncation.stride,
        "strategy": strategy,
        "direction": truncation_side,
    }
    return left, None, False  # as the Rust tokenizer reports it


@functools.lru_cache(maxsize=2)
def _rust_as_built(tokenizer_json: str, thread: int) -> Tokenizer:
    """A private Rust tokenizer of a state the shared one has left, one per `thread` (no lock)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(tokenizer_json)


def reference_of(tokenizer: AcceleratedTokenizerMixin) -> HFReference:
    """The reference an accelerated tokenizer hands the layers below it (for `tokbackend verify`)."""
    return tokenizer._tokbackend_reference


def model_name(tokenizer: Any) -> str:
    """The name logs and errors use: a built-in model's name, else its name or path, else its class."""
    name_or_path = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
    return builtin_name_of(name_or_path) or name_or_path


def accelerated_class(original: type[Any]) -> type[Any]:
    """The generated subclass of `original` that overrides only the encode surface, made once per
    class; it and its overrides keep the original's names, so `save_pretrained` and errors read as HF's."""
    for generated in original.__subclasses__():  # in the order they were made
        if generated.__dict__.get("_tokbackend_original_class") is original:
            return generated
    namespace = {
        "__module__": original.__module__,
        "__qualname__": original.__qualname__,
        "_tokbackend_original_class": original,
    }
    for name in ("encode", "_encode_plus"):
        namespace[name] = _named_like(AcceleratedTokenizerMixin.__dict__[name], getattr(original, name))
    type(original.__name__, (AcceleratedTokenizerMixin, original), namespace)
    return accelerated_class(original)  # the first made, should another thread have made one too


def _named_like(function: types.FunctionType, overridden: Any) -> types.FunctionType:
    """A copy of `function` (same code, same `super()` cell) named like `overridden`."""
    copied = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__, function.__closure__
    )
    copied.__kwdefaults__ = function.__kwdefaults__
    copied.__annotations__ = dict(getattr(overridden, "__annotations__", {}))
    copied.__doc__ = getattr(overridden, "__doc__", None)
    copied.__module__ = getattr(overridden, "__module__", function.__module__)
    copied.__qualname__ = getattr(overridden, "__qualname__", function.__qualname__)
    return copied


def _attach(
    tokenizer: PreTrainedTokenizerBase,
    options: AccelerationOptions,
    share_from: AccelerationState | None = None,
    copied: bool = False,
) -> PreTrainedTokenizerBase:
    accelerated = cast(AcceleratedTokenizerMixin, copy.copy(tokenizer))  # its class is swapped next
    accelerated.__class__ = accelerated_class(type(tokenizer))
    reference = HFReference(accelerated, model_name(tokenizer))
    accelerated._tokbackend_reference = reference
    accelerated._tokbackend_gate = gate_of(accelerated._tokenizer, accelerated)
    accelerated._tokbackend = state = AccelerationState(reference.model, options)
    if share_from is not None and share_from.build.content == reference.content():
        # The backends are immutable once built, so a copy shares them (and the counters).
        state.share_from(share_from, reference)
    else:
        state.rebuild(reference, changed=copied)  # a copy must not raise where HF's does not
    return accelerated


def accelerate(
    tokenizer: PreTrainedTokenizerBase,
    backend: str | None = None,
    *,
    options: AccelerationOptions | None = None,
    **changes: Any,
) -> PreTrainedTokenizerBase:
    """Return a copy of `tokenizer` whose plain-text encode runs on a fast backend.

    `backend` and keyword `changes` override fields of `options` (default `AccelerationOptions()`).
    The copy, an instance of a subclass of the tokenizer's class, serves any consumer of the
    original, which is left as it was; the two share HF's Rust state, so tokens added through
    either are seen by both.

    >>> fast = accelerate(AutoTokenizer.from_pretrained("Qwen/Qwen3-8B"))  # doctest: +SKIP
    >>> fast.encode("hello") == original.encode("hello")  # doctest: +SKIP
    True
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
        raise BackendUnavailableError(
            f"tokbackend: {model_name(tokenizer)} is loaded as a slow (Python) tokenizer {type(tokenizer).__name__}; "
            "accelerate() needs a fast tokenizer (load it with use_fast=True)"
        )
    return _attach(tokenizer, options)


def accelerate_like(
    tokenizer: PreTrainedTokenizerBase, earlier: PreTrainedTokenizerBase
) -> PreTrainedTokenizerBase | None:
    """`tokenizer` accelerated with the build `earlier` serves (no second load or probe), or None where
    the two might encode differently (another class, model or tokenizer.json)."""
    if not isinstance(earlier, AcceleratedTokenizerMixin) or isinstance(tokenizer, AcceleratedTokenizerMixin):
        return None
    state = earlier._tokbackend
    if type(tokenizer) is not earlier._tokbackend_original_class or model_name(tokenizer) != state.model:
        return None
    rust = getattr(tokenizer, "_tokenizer", None)
    build = state.build
    if rust is None or build.tokenizer_json is None or watch.content(rust) != build.content:
        return None
    if without_truncation_and_padding(rust.to_str()) != build.tokenizer_json:
        return None
    return _attach(tokenizer, state.options, share_from=state)
