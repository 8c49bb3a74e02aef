"""Noticing, on every call and in microseconds, a change to anything an encode depends on.

`fingerprint()` changes whenever the Rust tokenizer's added tokens, normalizer, pre-tokenizer,
post-processor or model may have: `watch()` wraps `add_tokens` and `add_special_tokens`, and a
`Tokenizer.model` setter (`_watch_model_assignments`), to put fresh markers in the object's
`__dict__`. `content()` is what a build is made from: two tokenizers with equal content encode alike.
"""

from __future__ import annotations

import functools
import logging
import operator
import weakref
from collections.abc import Callable, Hashable
from types import MappingProxyType
from typing import Any

_MARKER = "_tokbackend_added_tokens_marker"
_MODEL_MARKER = "_tokbackend_model_marker"  # absent until a model is assigned
_MUTATORS = ("add_tokens", "add_special_tokens")
# What each model type's encode reads besides its vocabulary, read with one `attrgetter` call.
_MODEL_FIELDS = MappingProxyType(
    {
        "BPE": operator.attrgetter(
            "dropout",
            "unk_token",
            "continuing_subword_prefix",
            "end_of_word_suffix",
            "fuse_unk",
            "byte_fallback",
            "ignore_merges",
        ),
        "WordPiece": operator.attrgetter("unk_token", "continuing_subword_prefix", "max_input_chars_per_word"),
        "WordLevel": operator.attrgetter("unk_token"),
    }
)


def watch(rust: Any, owner: Any) -> object:
    """Count the calls that change `rust`'s added tokens (while `owner` lives); returns the first
    marker."""
    namespace = rust.__dict__
    try:
        reference: Callable[[], Any] = weakref.ref(rust)
    except TypeError:  # tokenizers 0.22 takes no weak reference: unwatched when `owner` goes
        reference = lambda: rust  # noqa: E731
        weakref.finalize(owner, _unwatch, namespace)
    for name in _MUTATORS:
        namespace[name] = _marking(getattr(type(rust), name), reference)
    namespace[_MARKER] = marker = object()
    _watch_model_assignments(type(rust))
    return marker


def _watch_model_assignments(kind: type) -> None:
    """Make assigning `model` on any `kind` leave a fresh marker in the instance's `__dict__`
    (a class-level property around the original setter)."""
    original = kind.__dict__.get("model")
    if original is None or isinstance(original, property):
        return  # made already (a race makes it twice, each around the original: alike)

    def assign(rust: Any, model: Any) -> None:
        original.__set__(rust, model)
        rust.__dict__[_MODEL_MARKER] = object()

    try:
        kind.model = property(original.__get__, assign, doc=original.__doc__)  # type: ignore[attr-defined]
    except TypeError as error:  # a tokenizers release whose class is immutable
        logging.getLogger("tokbackend").warning(
            "tokbackend: cannot watch %s.model (%s): a model assigned after accelerate() is not seen; "
            "accelerate() the tokenizer again after assigning one",
            kind.__name__,
            error,
        )


def _unwatch(namespace: dict[str, Any]) -> None:
    for name in (*_MUTATORS, _MARKER):
        namespace.pop(name, None)


def _marking(method: Callable[..., Any], reference: Callable[[], Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def counted(*args: Any, **kwargs: Any) -> Any:
        rust = reference()
        try:
            return method(rust, *args, **kwargs)
        finally:
            rust.__dict__[_MARKER] = object()

    return counted


def _state(component: Any) -> bytes | None:
    return None if component is None else component.__getstate__()


def fingerprint(rust: Any, owner: Any) -> Hashable:
    """Changes whenever anything an encode through `rust` (held by `owner`) depends on may have
    changed; read on every call."""
    marker = rust.__dict__.get(_MARKER)
    if marker is None:
        marker = watch(rust, owner)
    normalizer, pre_tokenizer, post_processor, model = (
        rust.normalizer,
        rust.pre_tokenizer,
        rust.post_processor,
        rust.model,
    )
    kind = type(model)
    fields = _MODEL_FIELDS.get(kind.__name__)
    return (
        id(rust),
        marker,
        rust.__dict__.get(_MODEL_MARKER),
        None if normalizer is None else normalizer.__getstate__(),
        None if pre_tokenizer is None else pre_tokenizer.__getstate__(),
        None if post_processor is None else post_processor.__getstate__(),
        (kind, rust.get_vocab_size(False), None if fields is None else fields(model)),
    )


def content(rust: Any) -> Hashable:
    """Everything an encode through `rust` depends on but the vocabulary: equal for tokenizers that encode alike."""
    added = tuple(
        (token_id, token.content, token.special, token.lstrip, token.rstrip, token.single_word, token.normalized)
        for token_id, token in sorted(rust.get_added_tokens_decoder().items())
    )
    model = rust.model
    fields = _MODEL_FIELDS.get(type(model).__name__)
    model_state = (
        type(model),
        rust.get_vocab_size(False),
        None if fields is None else fields(model),
        rust.__dict__.get(_MODEL_MARKER),
    )
    return (_state(rust.normalizer), _state(rust.pre_tokenizer), _state(rust.post_processor), model_state, added)
