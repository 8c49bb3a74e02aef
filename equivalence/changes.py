"""Changes to a tokenizer after `accelerate()`, one per way HuggingFace's encode can change.

Each `Change` mutates a tokenizer the way a user or a library would: through transformers
(`add_tokens`, `add_special_tokens`), through `backend_tokenizer` (assigning a normalizer,
pre-tokenizer, post-processor or model, a model flag, truncation or padding), or in place (a
pre-tokenizer's own setting, written through to the tokenizer). Applied to the accelerated
object or to the original it was made from (they share HF's Rust tokenizer), every one must leave
the accelerated encode equal to HF's on every text: the backend rebuilt, or HF answering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tokenizers import AddedToken, normalizers, pre_tokenizers, processors


@dataclasses.dataclass(frozen=True)
class Change:
    name: str
    apply: Callable[[object], None]  # the tokenizer (accelerated or original) -> None
    texts: tuple[str, ...]  # texts whose ids the change affects


def _added(tokenizer) -> list[str]:
    return [str(token) for token in tokenizer.added_tokens_decoder.values()]


def _readd_stripped(tokenizer) -> None:
    """An added token re-added with lstrip and rstrip: same content, same id, other flags."""
    content = next(token for token in _added(tokenizer) if token.startswith("<"))
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [AddedToken(content, lstrip=True, rstrip=True, normalized=False)]}
    )


def _in_place_pre_tokenizer(tokenizer) -> None:
    """A pre-tokenizer setting changed in place: `pre_tokenizer` returns an object sharing the
    tokenizer's own, so its setters write through."""
    pre_tokenizer = tokenizer.backend_tokenizer.pre_tokenizer
    if isinstance(pre_tokenizer, pre_tokenizers.Sequence):
        pre_tokenizer = pre_tokenizer[len(pre_tokenizer) - 1] if hasattr(pre_tokenizer, "__len__") else pre_tokenizer[1]
    pre_tokenizer.add_prefix_space = True


def _set_normalizer(normalizer) -> Callable[[object], None]:
    def apply(tokenizer) -> None:
        tokenizer.backend_tokenizer.normalizer = normalizer

    return apply


def _set_post_processor(tokenizer) -> None:
    first, last = _added(tokenizer)[0], _added(tokenizer)[-1]
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{first} $A {last}",
        special_tokens=[(first, tokenizer.convert_tokens_to_ids(first)), (last, tokenizer.convert_tokens_to_ids(last))],
    )


def _fewer_merges(tokenizer) -> None:
    """The model replaced by one with the same vocabulary and flags but without its first merges
    (where it has merges; otherwise without its last vocabulary entry): no field read per call differs."""
    import json

    from tokenizers import Tokenizer

    rust = tokenizer.backend_tokenizer
    spec = json.loads(rust.to_str())
    model = spec["model"]
    if model.get("merges"):
        model["merges"] = model["merges"][50:]
    else:
        vocab = model["vocab"]
        if isinstance(vocab, dict):
            last = max(vocab, key=vocab.get)
            vocab[last + "\u2063"] = vocab.pop(last)  # the same size, one token renamed
        else:
            vocab[-1] = [vocab[-1][0] + "\u2063", vocab[-1][1]]
    rust.model = Tokenizer.from_str(json.dumps(spec)).model


def _split_digits(tokenizer) -> None:
    rust = tokenizer.backend_tokenizer
    rust.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), rust.pre_tokenizer])


SAMPLE = ("hello world", "xhelloy", "don't 12345 6789", " leading space", "Ｆｕｌｌ ｗｉｄｔｈ ①②", "e\u0301 \ufb01")

CHANGES = (
    Change("an existing vocabulary token added", lambda tokenizer: tokenizer.add_tokens(["hello"]), SAMPLE),
    Change("a new token added", lambda tokenizer: tokenizer.add_tokens(["<new_token>"]), ("a<new_token>b", *SAMPLE)),
    Change(
        "a special token added",
        lambda tokenizer: tokenizer.add_special_tokens({"additional_special_tokens": ["[[NEW]]"]}),
        ("a[[NEW]]b", *SAMPLE),
    ),
    Change("an added token re-added with lstrip and rstrip", _readd_stripped, ()),  # its texts: `texts_for`
    Change("the normalizer replaced (NFKC)", _set_normalizer(normalizers.NFKC()), SAMPLE),
    Change("the normalizer removed", _set_normalizer(None), SAMPLE),
    Change("the pre-tokenizer replaced (digits split first)", _split_digits, SAMPLE),
    Change("a pre-tokenizer setting changed in place", _in_place_pre_tokenizer, SAMPLE),
    Change("the post-processor replaced (BOS/EOS)", _set_post_processor, SAMPLE),
    Change("the model replaced (the same vocabulary size and flags, other merges)", _fewer_merges, SAMPLE),
    Change(
        "truncation and padding set on the Rust tokenizer",
        lambda tokenizer: (
            tokenizer.backend_tokenizer.enable_truncation(3),
            tokenizer.backend_tokenizer.enable_padding(length=40),
        ),
        SAMPLE,
    ),
)


def texts_for(change: Change, tokenizer) -> list[str]:
    """The change's texts, and each added token glued to text and amid spaces."""
    added = _added(tokenizer)[:3]
    return [*change.texts, *(f"x {token} y" for token in added), *(f"x{token}y" for token in added), *SAMPLE]
