"""The added-token split against HuggingFace's own, over the rule's whole flag space.

Two harnesses share one vocabulary of inputs: added tokens that are prefixes, suffixes and
overlaps of each other and of a model's own specials, of both kinds (`normalized` or not, special
or not) with every flag (`lstrip`, `rstrip`, `single_word`), and text that puts them side by side,
inside words, amid white space (Unicode's too) and next to characters a normalizer changes.

- `split_matches_hf` checks `tokbackend._added_tokens.AddedTokens` alone: a character-level
  tokenizer (BPE without merges) gives one id per character, so HF's ids of a text show exactly
  where HF split it; the split's pieces, encoded by the same tokenizer without its added tokens,
  must give the same ids. Hypothesis draws the tokens, the normalizer, the text and
  `split_special_tokens`.
- `accelerated_matches_hf` is the user's view: a family's tokenizer with random added tokens,
  accelerated on a backend, against HF in every call form (encode, `__call__`, a batch, arrays,
  a chat template), with a seeded generator (each token set costs a build).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

# Characters the texts and the token contents are made of: the ASCII an added token is usually
# made of, white space HF strips (Unicode's too), word characters for `single_word` (a combining
# mark and a joiner count as word characters), and characters normalizers change.
_SYMBOLS = "<|>=_/[]"
_LETTERS = "abxyzAB"
_SPACES = " \t\n\u2000\u00a0\u3000"
_OTHERS = "19.,'\u00e9\u0301\u200d\u00df\u0130\u4e2d\uff21\u2126"
ALPHABET = _SYMBOLS + _LETTERS + _SPACES + _OTHERS

# Normalizers of the families' pipelines and others a user's tokenizer has (tokenizer.json sections).
NORMALIZERS: tuple[dict[str, Any] | None, ...] = (
    None,
    {"type": "NFC"},
    {"type": "NFKC"},
    {"type": "NFD"},
    {"type": "Lowercase"},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]},
    {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ],
    },
    {"type": "Strip", "strip_left": True, "strip_right": True},
)
_EMPTY_SECTIONS = ("truncation", "padding", "pre_tokenizer", "post_processor", "decoder")
# Specials models ship, whose prefixes, suffixes and overlaps user tokens are drawn from.
MODEL_SPECIALS = ("<|im_end|>", "<|eot_id|>", "</s>", "<mask>", "[CLS]", "<|im_start|>")


@dataclasses.dataclass(frozen=True)
class TokenSpec:
    """An added token to add, with every flag HF's rule reads."""

    content: str
    special: bool
    normalized: bool
    lstrip: bool
    rstrip: bool
    single_word: bool

    def added_token(self) -> Any:
        from tokenizers import AddedToken

        return AddedToken(
            self.content,
            single_word=self.single_word,
            lstrip=self.lstrip,
            rstrip=self.rstrip,
            normalized=self.normalized,
            special=self.special,
        )


def _fragments(content: str) -> list[str]:
    """Prefixes, suffixes and inner pieces of a content: tokens that overlap it."""
    cuts = range(1, len(content))
    return [content[:cut] for cut in cuts] + [content[cut:] for cut in cuts] + [content[1:-1]] * (len(content) > 2)


_CONTENT_SOURCES = sorted(
    {fragment for special in MODEL_SPECIALS for fragment in (special, *_fragments(special))} - {""}
)


def token_contents() -> st.SearchStrategy[str]:
    """A content: a model's special or a piece of one, glued to another, or a short run of the alphabet."""
    known = st.sampled_from(_CONTENT_SOURCES)
    return st.one_of(
        known,
        st.builds(lambda a, b: a + b, known, known),
        st.text(st.sampled_from(ALPHABET), min_size=1, max_size=4),
    ).filter(bool)


def token_specs(contents: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[TokenSpec]:
    return st.builds(
        TokenSpec,
        contents if contents is not None else token_contents(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    )


def texts_around(contents: Sequence[str]) -> st.SearchStrategy[str]:
    """Text made of the contents, pieces of them and the alphabet, side by side."""
    pieces = [fragment for content in contents for fragment in (content, *_fragments(content))]
    parts = st.one_of(st.sampled_from(pieces), st.text(st.sampled_from(ALPHABET), max_size=3))
    return st.lists(parts, max_size=8).map("".join)


def char_level_tokenizer_json(normalizer: dict[str, Any] | None) -> str:
    """A tokenizer that gives one id per character (BPE without merges over `ALPHABET` and the
    characters normalizers make of it), so its ids show where HF split a text."""
    from tokbackend._added_tokens import normalizer_of

    characters = set(ALPHABET) | set("\u2581") | {chr(code) for code in range(0x61, 0x7B)}
    if normalizer is not None:
        normalize = normalizer_of(normalizer)
        for character in ALPHABET:
            characters.update(normalize(character))
    vocab = {"[UNK]": 0, **{character: index + 1 for index, character in enumerate(sorted(characters))}}
    model = {"type": "BPE", "vocab": vocab, "merges": [], "unk_token": "[UNK]", "dropout": None}
    return json.dumps(
        {
            **dict.fromkeys(_EMPTY_SECTIONS),
            "version": "1.0",
            "added_tokens": [],
            "normalizer": normalizer,
            "model": model,
        }
    )


@dataclasses.dataclass(frozen=True)
class SplitCase:
    normalizer: dict[str, Any] | None
    tokens: tuple[TokenSpec, ...]
    text: str
    split_special_tokens: bool


def split_cases() -> st.SearchStrategy[SplitCase]:
    """A normalizer, up to six added tokens, a text around them, and `split_special_tokens`."""

    def case(normalizer: dict[str, Any] | None, tokens: list[TokenSpec]) -> st.SearchStrategy[SplitCase]:
        contents = [token.content for token in tokens]
        return st.builds(SplitCase, st.just(normalizer), st.just(tuple(tokens)), texts_around(contents), st.booleans())

    tokens = st.lists(token_specs(), min_size=1, max_size=6, unique_by=lambda token: token.content)
    return st.tuples(st.sampled_from(NORMALIZERS), tokens).flatmap(lambda drawn: case(*drawn))


def split_matches_hf(
    case: SplitCase, split: Callable[[str, str, bool], list[str | int] | None] | None = None
) -> str | None:
    """None where the split of `case.text` (`split(tokenizer_json, text, split_special_tokens)`,
    by default `AddedTokens`) gives HF's ids, or leaves the text to HF; else what differs."""
    from tokenizers import Tokenizer

    from tokbackend._added_tokens import AddedTokens

    plain = Tokenizer.from_str(char_level_tokenizer_json(case.normalizer))
    hf = Tokenizer.from_str(plain.to_str())
    for token in case.tokens:
        (hf.add_special_tokens if token.special else hf.add_tokens)([token.added_token()])
    hf.encode_special_tokens = case.split_special_tokens
    tokenizer_json = hf.to_str()
    if AddedTokens.from_tokenizer_json(tokenizer_json).hf_only:
        return None  # a token the normalizer empties: HF itself panics or runs out of memory
    expected = hf.encode(case.text, add_special_tokens=False).ids
    if split is None:
        tokens = AddedTokens.from_tokenizer_json(tokenizer_json)
        parts = tokens.split(case.text, case.split_special_tokens)
        if not case.split_special_tokens:
            strict = tokens.for_backend(case.text)
            if strict is not None and strict != parts:
                return f"for_backend {strict!r} is not split {parts!r}"
    else:
        parts = split(tokenizer_json, case.text, case.split_special_tokens)
    if parts is None:
        return None
    got = [token_id for part in parts for token_id in ([part] if isinstance(part, int) else plain.encode(part).ids)]
    if got != expected:
        return f"split {parts!r}: ids {got} where HF gives {expected}"
    return None


# The user's view: a family's tokenizer with random added tokens, accelerated.


def random_token_set(rng: random.Random, model_tokens: Sequence[str], size: int) -> list[TokenSpec]:
    """`size` tokens drawn from the whole flag space, their contents from the model's own added
    tokens' pieces and overlaps and from short runs of the alphabet."""
    sources = [fragment for content in model_tokens for fragment in _fragments(content) if fragment.strip()]
    sources += [content for content in _CONTENT_SOURCES]
    tokens: dict[str, TokenSpec] = {}
    while len(tokens) < size:
        roll = rng.random()
        if roll < 0.5:
            content = rng.choice(sources)
        elif roll < 0.7:
            content = rng.choice(sources) + rng.choice(sources)
        else:
            content = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3)))
        if content.strip():
            flags = [rng.random() < 0.4 for _ in range(5)]
            tokens[content] = TokenSpec(content, *flags)
    return list(tokens.values())


def random_text(rng: random.Random, contents: Sequence[str], parts: int = 10) -> str:
    """Text putting the contents side by side, cut, amid white space, words and other scripts."""
    words = [
        "hello",
        " world",
        "x",
        "\u00e9t\u00e9",
        "\u4e2d\u6587",
        " ",
        "  ",
        "\n",
        "\t",
        "\u2000",
        "1",
        "e\u0301",
        "_",
    ]
    pieces = []
    for _ in range(rng.randint(1, parts)):
        roll = rng.random()
        if roll < 0.45 and contents:
            content = rng.choice(contents)
            pieces.append(content if rng.random() < 0.7 else rng.choice(_fragments(content) or [content]))
        elif roll < 0.85:
            pieces.append(rng.choice(words))
        else:
            pieces.append(rng.choice(ALPHABET))
    return "".join(pieces)


def with_tokens(hf: Any, tokens: Sequence[TokenSpec]) -> None:
    """Add `tokens` to a transformers tokenizer as a user does (`add_tokens`, specials as specials)."""
    specials = [token.added_token() for token in tokens if token.special]
    others = [token.added_token() for token in tokens if not token.special]
    if others:
        hf.add_tokens(others)
    if specials:
        hf.add_tokens(specials, special_tokens=True)


def call_forms(tokenizer: Any) -> dict[str, Callable[[list[str]], Any]]:
    """Each call form users make, over a list of texts, answering plain lists."""
    from tokbackend import ids_as_arrays

    def arrays(texts: list[str]) -> Any:
        with ids_as_arrays():
            return [list(tokenizer.encode(text)) for text in texts] + [
                list(row) for row in tokenizer(texts)["input_ids"]
            ]

    def chat(texts: list[str]) -> Any:
        if not getattr(tokenizer, "chat_template", None):
            return None
        messages = [{"role": "user", "content": texts[0]}, {"role": "assistant", "content": texts[-1]}]
        rendered = tokenizer.apply_chat_template(messages, tokenize=True)
        return list(rendered["input_ids"]) if hasattr(rendered, "keys") else list(rendered)

    return {
        "encode": lambda texts: [tokenizer.encode(text) for text in texts],
        "encode without specials": lambda texts: [tokenizer.encode(text, add_special_tokens=False) for text in texts],
        "__call__": lambda texts: [tokenizer(text)["input_ids"] for text in texts],
        "batch": lambda texts: tokenizer(texts)["input_ids"],
        "arrays": arrays,
        "chat": chat,
    }


@dataclasses.dataclass(frozen=True)
class AcceleratedMismatch:
    family: str
    backend: str
    tokens: tuple[TokenSpec, ...]
    form: str
    texts: tuple[str, ...]
    hf: Any
    accelerated: Any

    def report(self) -> str:
        return (
            f"{self.family} on {self.backend}, {self.form} of {list(self.texts)!r} with added tokens "
            f"{list(self.tokens)}:\n"
            f"  HF          {self.hf}\n  accelerated {self.accelerated}"
        )


@dataclasses.dataclass
class AcceleratedRun:
    """What `accelerated_matches_hf` compared: texts per call form, how many the backend answered
    (the rest went to HF, by reason), and the mismatches."""

    compared: int = 0
    fast_texts: int = 0
    fallbacks: dict[str, int] = dataclasses.field(default_factory=dict)
    mismatches: list[AcceleratedMismatch] = dataclasses.field(default_factory=list)


def accelerated_matches_hf(
    family: str, backend: str, seed: int, token_sets: int = 3, texts_per_set: int = 40, **options: Any
) -> AcceleratedRun:
    """`family` ("small" vocabulary) accelerated on `backend` (with `options`), with `token_sets`
    random sets of added tokens, each against HF on `texts_per_set` texts in every call form. A
    backend that cannot load the family is left out (nothing compared)."""
    import tokbackend
    from tokbackend import BackendUnavailableError

    from .differential import answer_of
    from .families import build_family

    rng = random.Random(f"{family}/{backend}/{seed}")
    run = AcceleratedRun()
    for _ in range(token_sets):
        hf = build_family(family, "small")
        model_tokens = [str(token) for token in hf.added_tokens_decoder.values()]
        tokens = random_token_set(rng, model_tokens, rng.randint(1, 5))
        with_tokens(hf, tokens)
        try:
            fast = tokbackend.accelerate(hf, backend, **options)
        except BackendUnavailableError:
            return run
        contents = [token.content for token in tokens] + model_tokens
        texts = [random_text(rng, contents) for _ in range(texts_per_set)]
        forms, fast_forms = call_forms(hf), call_forms(fast)
        for start in range(0, len(texts), 4):
            batch = texts[start : start + 4]
            for form, call in forms.items():
                expected, got = answer_of(call, batch), answer_of(fast_forms[form], batch)
                run.compared += len(batch)
                if expected != got:
                    run.mismatches.append(
                        AcceleratedMismatch(family, backend, tuple(tokens), form, tuple(batch), expected, got)
                    )
        stats = fast.tokbackend.stats()
        run.fast_texts += stats["fast_texts"]
        for reason, count in stats["fallbacks"].items():
            run.fallbacks[reason] = run.fallbacks.get(reason, 0) + count
    return run


__all__ = [
    "ALPHABET",
    "NORMALIZERS",
    "AcceleratedMismatch",
    "AcceleratedRun",
    "SplitCase",
    "TokenSpec",
    "accelerated_matches_hf",
    "call_forms",
    "char_level_tokenizer_json",
    "random_text",
    "random_token_set",
    "split_cases",
    "split_matches_hf",
    "with_tokens",
]
