"""The split surface and its policy: plain-text encode on the backend, exact; everything else on
HuggingFace, counted by reason; bad input fails as it fails on HuggingFace."""

from __future__ import annotations

import copy
import logging
import pickle
import sys
import uuid
from array import array

import pytest
from conftest import LONG, fast_counts
from hypothesis import settings
from tokenizers import processors

import tokbackend
from tokbackend._policy import FallbackReason, fast_path_reason
from tokbackend._tokenizer import AcceleratedTokenizerMixin
from tokbackend.equivalence.corpus import prompt_text
from tokbackend.equivalence.differential import find_mismatch

TEXTS = [
    "Hello! 毕老师！1 + 1 = 2",
    "<|im_start|>user\nhi<think>x</think><|im_end|>\n<tool_call>{}</tool_call>",
    "near misses <|im_start| <|im_end|>> <<|endoftext|>",
    "e\u0301 \U0001f468\u200d\U0001f469\u200d\U0001f467 1\ufe0f\u20e3   \t\r\n 12345678",
    prompt_text(1, 20000, "mixed"),
]


def assert_plain_ids(value, nested: bool) -> None:
    """Ids are a plain list of plain ints (nested: a list of such lists), never arrays."""
    rows = value if nested else [value]
    assert type(value) is list
    for row in rows:
        assert type(row) is list
        assert all(type(token) is int for token in row)


# -- 1. plain-text encode goes to the backend -------------------------------------------------


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
@pytest.mark.parametrize("add_special_tokens", [False, True])
def test_encode_is_exact_and_served_by_the_backend(hf_tokenizer, fast_tokenizer, text, add_special_tokens):
    before, fallbacks = fast_counts(fast_tokenizer)
    ids = fast_tokenizer.encode(text, add_special_tokens=add_special_tokens)
    assert ids == hf_tokenizer.encode(text, add_special_tokens=add_special_tokens)
    assert_plain_ids(ids, nested=False)
    assert fast_counts(fast_tokenizer) == (before + 1, fallbacks)


def test_call_on_str_and_on_batch(hf_tokenizer, fast_tokenizer):
    before, fallbacks = fast_counts(fast_tokenizer)
    single = fast_tokenizer(TEXTS[0])
    batch = fast_tokenizer(TEXTS)
    assert dict(single) == dict(hf_tokenizer(TEXTS[0]))
    assert dict(batch) == dict(hf_tokenizer(TEXTS))
    assert_plain_ids(single["input_ids"], nested=False)
    assert_plain_ids(batch["input_ids"], nested=True)
    assert batch["attention_mask"] == [[1] * len(ids) for ids in batch["input_ids"]]
    assert dict(fast_tokenizer(TEXTS, return_attention_mask=False)) == {"input_ids": batch["input_ids"]}
    assert fast_counts(fast_tokenizer) == (before + 1 + 2 * len(TEXTS), fallbacks)


def test_batch_uses_the_backend_batch_call(fast_tokenizer, hf_tokenizer):
    """Unseen texts of one batch reach the backend in one batch call (through the segment cache,
    which is on by default: they are its misses)."""
    backend = fast_tokenizer.tokbackend.backend
    calls = []
    original = type(backend).encode_batch

    def counting(self, texts):
        calls.append(len(texts))
        return original(self, texts)

    marker = uuid.uuid4().hex
    plain = [text for text in TEXTS + ["plain words", "more words"] * 2 if "<" not in text]
    texts = [f"{marker} {index} {text}" for index, text in enumerate(plain)]
    type(backend).encode_batch = counting
    try:
        ids = fast_tokenizer(texts)["input_ids"]
    finally:
        type(backend).encode_batch = original
    assert calls == [len(texts)] and len(texts) > 4
    assert ids == hf_tokenizer(texts)["input_ids"]


def test_ids_as_arrays_gives_hfs_ids_as_arrays_only_inside(hf_tokenizer, fast_tokenizer):
    """Inside `ids_as_arrays()` plain-text encodes give `array('q')` rows equal to HF's lists,
    straight from the backend's buffer (counted as such), with special-token affixes, through the
    segment cache and for guarded texts; outside, and for what HF answers, lists as always."""
    marker = uuid.uuid4().hex  # unseen by the segment cache
    texts = [f"{marker} {index} {text}" for index, text in enumerate(TEXTS)] + [TEXTS[1], "a\u0300\u1ae6 \u017f"]
    before = fast_tokenizer.tokbackend.stats()
    with tokbackend.ids_as_arrays():
        singles = [fast_tokenizer.encode(text) for text in texts]
        plus = fast_tokenizer(texts[0], add_special_tokens=False)["input_ids"]
        batch = fast_tokenizer(texts)["input_ids"]
        tensors = fast_tokenizer(texts[0], return_tensors="np")["input_ids"]
        pair = fast_tokenizer.encode(texts[0], texts[2])
    for rows, add in ((singles, True), (batch, True), ([plus], False)):
        expected = [hf_tokenizer.encode(text, add_special_tokens=add) for text in texts[: len(rows)]]
        assert [list(row) for row in rows] == expected
        assert all(type(row) is array and row.typecode == "q" for row in rows)
    assert tensors.tolist() == [hf_tokenizer.encode(texts[0])]
    assert_plain_ids(pair, nested=False)  # a pair goes to HF, which gives a list
    after = fast_tokenizer.tokbackend.stats()
    as_arrays = after["fast_texts_as_arrays"] - before["fast_texts_as_arrays"]
    # every text the backend answered inside was answered as an array (return_tensors goes to HF)
    assert as_arrays == after["fast_texts"] - before["fast_texts"] >= len(texts)
    assert_plain_ids(fast_tokenizer.encode(texts[0]), nested=False)
    assert_plain_ids(fast_tokenizer(texts)["input_ids"], nested=True)


def test_chat_template_encode_goes_through_the_fast_path(hf_tokenizer, fast_tokenizer):
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": TEXTS[3] + TEXTS[4][:3000]},
    ]
    before, fallbacks = fast_counts(fast_tokenizer)
    ours = fast_tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    theirs = hf_tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    assert dict(ours) == dict(theirs) if hasattr(theirs, "keys") else ours == theirs
    assert fast_counts(fast_tokenizer) == (before + 1, fallbacks)
    rendered = fast_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


# -- 2. everything else stays on HuggingFace --------------------------------------------------


def test_hf_surfaces_are_untouched(hf_tokenizer, fast_tokenizer, tmp_path):
    ids = hf_tokenizer.encode(TEXTS[1] + TEXTS[4][:2000])
    before = fast_counts(fast_tokenizer)
    assert fast_tokenizer.decode(ids) == hf_tokenizer.decode(ids)
    assert fast_tokenizer.decode(ids, skip_special_tokens=True) == hf_tokenizer.decode(ids, skip_special_tokens=True)
    assert fast_tokenizer.batch_decode([ids, ids[:5]]) == hf_tokenizer.batch_decode([ids, ids[:5]])
    assert fast_tokenizer.convert_ids_to_tokens(ids) == hf_tokenizer.convert_ids_to_tokens(ids)
    assert fast_tokenizer.convert_tokens_to_ids(["<|im_end|>", "hello"]) == hf_tokenizer.convert_tokens_to_ids(
        ["<|im_end|>", "hello"]
    )
    assert fast_tokenizer.get_vocab() == hf_tokenizer.get_vocab()
    assert len(fast_tokenizer) == len(hf_tokenizer)
    assert fast_tokenizer.all_special_ids == hf_tokenizer.all_special_ids
    assert fast_tokenizer.eos_token_id == hf_tokenizer.eos_token_id
    assert fast_tokenizer.tokenize(TEXTS[0]) == hf_tokenizer.tokenize(TEXTS[0])
    assert fast_tokenizer.backend_tokenizer is hf_tokenizer.backend_tokenizer
    fast_tokenizer.save_pretrained(tmp_path)
    reloaded = tokbackend.load_hf(str(tmp_path))
    assert type(reloaded).__name__ == type(hf_tokenizer).__name__
    assert reloaded.encode(TEXTS[1]) == hf_tokenizer.encode(TEXTS[1])
    assert fast_counts(fast_tokenizer) == before  # none of the above was encode traffic


def test_incremental_detokenization_matches_hf(hf_tokenizer, fast_tokenizer):
    ids = fast_tokenizer.encode(TEXTS[3] + TEXTS[0])
    ours, theirs = [], []
    for end in range(1, len(ids) + 1):
        ours.append(fast_tokenizer.decode(ids[:end]))
        theirs.append(hf_tokenizer.decode(ids[:end]))
    assert ours == theirs


# -- 3. what the fast path cannot answer goes to HuggingFace, counted -------------------------


FALLBACK_CALLS = {
    "text_pair": lambda tok: tok("question", "answer"),
    "return_offsets_mapping": lambda tok: tok(TEXTS[0], return_offsets_mapping=True),
    "truncation": lambda tok: tok(TEXTS[4], truncation=True, max_length=16),
    "padding": lambda tok: tok(TEXTS[:3], padding=True),
    "return_tensors": lambda tok: tok(TEXTS[:2], return_tensors="np", padding=True),
    "split_special_tokens": lambda tok: tok(TEXTS[1], split_special_tokens=True),
    "is_split_into_words": lambda tok: tok(["hello", "world"], is_split_into_words=True),
    "return_special_tokens_mask": lambda tok: tok(TEXTS[1], return_special_tokens_mask=True),
    "return_length": lambda tok: tok(TEXTS[0], return_length=True),
    "return_overflowing_tokens": lambda tok: tok(
        TEXTS[4], truncation=True, max_length=8, return_overflowing_tokens=True
    ),
    "unknown_kwarg": lambda tok: tok(TEXTS[0], some_future_flag=1),
}


def _comparable(encoding):
    return {key: (value.tolist() if hasattr(value, "tolist") else value) for key, value in encoding.items()}


@pytest.mark.parametrize("reason", sorted(FALLBACK_CALLS))
def test_fallbacks_match_hf_and_are_counted(hf_tokenizer, fast_tokenizer, reason, caplog):
    call = FALLBACK_CALLS[reason]
    expected_reason = (
        "padding" if reason == "return_tensors" else ("truncation" if reason == "return_overflowing_tokens" else reason)
    )
    _, fallbacks = fast_counts(fast_tokenizer)
    with caplog.at_level(logging.INFO, logger="tokbackend"):
        ours = call(fast_tokenizer)
        call(fast_tokenizer)
    assert _comparable(ours) == _comparable(call(hf_tokenizer))
    after = fast_counts(fast_tokenizer)[1]
    texts = {"padding": 3, "return_tensors": 2}.get(reason, 1)  # each text of a batch counted once
    assert after[expected_reason] == fallbacks.get(expected_reason, 0) + 2 * texts
    logged = [record for record in caplog.records if expected_reason in record.getMessage()]
    assert len(logged) <= 1  # once per reason per tokenizer (zero when an earlier test logged it)


def test_each_reason_is_logged_once(fresh_pair, caplog):
    _, fast = fresh_pair
    with caplog.at_level(logging.INFO, logger="tokbackend"):
        for _ in range(3):
            fast("a", "b")
    messages = [record.getMessage() for record in caplog.records if "text_pair" in record.getMessage()]
    assert len(messages) == 1
    assert "gigatoken" in messages[0] and "reason: text_pair" in messages[0]


def test_tokenizer_level_split_special_tokens_is_honoured(fresh_pair):
    hf, fast = fresh_pair
    fast.split_special_tokens = True
    hf.split_special_tokens = True
    assert fast.encode(TEXTS[1]) == hf.encode(TEXTS[1])
    assert fast.tokbackend.stats()["fallbacks"]["split_special_tokens"] == 1


def test_encode_is_answered_by_the_backend_where_the_tokenizer_returns_token_type_ids(fresh_pair):
    """`encode()` returns ids alone: a tokenizer whose `model_input_names` hold token_type_ids
    (BERT-style configs) makes `tok(text)` return them, which HF answers, never `encode` (every
    `encode()` of such a tokenizer went to HF)."""
    hf, fast = fresh_pair
    for tokenizer in (hf, fast):
        tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    before, _ = fast_counts(fast)
    assert fast.encode(TEXTS[1]) == hf.encode(TEXTS[1])
    assert fast_counts(fast)[0] == before + 1 and "return_token_type_ids" not in fast.tokbackend.stats()["fallbacks"]
    assert dict(fast(TEXTS[1])) == dict(hf(TEXTS[1])) and "token_type_ids" in fast(TEXTS[1])
    assert fast.tokbackend.stats()["fallbacks"]["return_token_type_ids"] == 2


def test_the_policy_is_one_pure_function():
    from transformers.tokenization_utils_base import TruncationStrategy

    defaults = (False, False)  # split_special_tokens, returns_token_type_ids
    longest = {"truncation_strategy": TruncationStrategy.LONGEST_FIRST, "max_length": 8}
    assert fast_path_reason("x", None, True, longest, *defaults) is None
    assert fast_path_reason("x", None, True, {"truncation_strategy": TruncationStrategy.LONGEST_FIRST}, *defaults) is (
        FallbackReason.ARGUMENT_VALUE  # no max_length: HF would hand Rust None
    )
    only_second = {"truncation_strategy": TruncationStrategy.ONLY_SECOND, "max_length": 8}
    assert fast_path_reason("x", None, True, only_second, *defaults) is FallbackReason.TRUNCATION
    # a plain string where HF's own layer passes the enum: HF's `_encode_plus` reads `.value`
    assert fast_path_reason("x", None, True, {**longest, "truncation_strategy": "longest_first"}, *defaults) is (
        FallbackReason.TRUNCATION
    )
    assert fast_path_reason("x", "y", True, {}, *defaults) is FallbackReason.TEXT_PAIR
    assert fast_path_reason([1, 2], None, True, {}, *defaults) is FallbackReason.NON_TEXT_INPUT
    assert fast_path_reason("x", None, True, {"future": 1}, *defaults) is FallbackReason.UNKNOWN_KWARG
    assert fast_path_reason("x", None, True, {}, True, False) is FallbackReason.SPLIT_SPECIAL_TOKENS
    # values HF's Rust side rejects are never answered by the backend
    assert fast_path_reason("x", None, 0, {}, *defaults) is FallbackReason.ARGUMENT_VALUE
    assert fast_path_reason("x", None, True, {**longest, "stride": -1}, *defaults) is FallbackReason.ARGUMENT_VALUE
    assert fast_path_reason("x", None, True, {**longest, "max_length": 8.0}, *defaults) is FallbackReason.ARGUMENT_VALUE
    assert fast_path_reason("x", None, True, {"split_special_tokens": 0}, *defaults) is FallbackReason.ARGUMENT_VALUE
    assert fast_path_reason("x", None, True, {"is_split_into_words": None}, *defaults) is FallbackReason.ARGUMENT_VALUE
    assert fast_path_reason("x", None, True, longest, False, False, "middle") is FallbackReason.ARGUMENT_VALUE


# -- 4. truncation that cuts nothing stays fast -----------------------------------------------


def test_truncation_that_cuts_nothing_is_answered_by_the_backend(fast_tokenizer, hf_tokenizer):
    before = fast_tokenizer.tokbackend.stats()
    length = len(hf_tokenizer.encode(LONG))
    for kwargs in ({"truncation": True, "max_length": length + 1}, {"truncation": True, "max_length": length}):
        assert fast_tokenizer(LONG, **kwargs)["input_ids"] == hf_tokenizer(LONG, **kwargs)["input_ids"]
        assert fast_tokenizer.encode(LONG, **kwargs) == hf_tokenizer.encode(LONG, **kwargs)
    after = fast_tokenizer.tokbackend.stats()
    assert after["fast_texts"] == before["fast_texts"] + 4
    assert after["fallbacks"].get("truncation", 0) == before["fallbacks"].get("truncation", 0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_truncation_that_cuts_goes_to_hf_on_the_tokenizers_side(fresh_pair, side):
    hf, fast = fresh_pair
    hf.truncation_side = fast.truncation_side = side
    length = len(hf.encode(LONG))
    kwargs = {"truncation": True, "max_length": length - 7}
    assert fast.encode(LONG, **kwargs) == hf.encode(LONG, **kwargs)
    assert fast([LONG, "short"], **kwargs)["input_ids"] == hf([LONG, "short"], **kwargs)["input_ids"]
    assert fast.tokbackend.stats()["fallbacks"]["truncation"] == 3


# -- 5. bad input -----------------------------------------------------------------------------


BAD_INPUTS = [None, 1, b"bytes", "lone \ud800 surrogate", ["ok", None], [], 3.5]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=repr)
@pytest.mark.parametrize("method", ["encode", "__call__"])
def test_bad_input_raises_what_hf_raises(hf_tokenizer, fast_tokenizer, bad, method):
    with pytest.raises(BaseException) as theirs:
        getattr(hf_tokenizer, method)(bad)
    with pytest.raises(BaseException) as ours:
        getattr(fast_tokenizer, method)(bad)
    assert type(ours.value) is type(theirs.value)
    assert isinstance(ours.value, Exception)


def test_out_of_range_ids_decode_as_hf_does(hf_tokenizer, fast_tokenizer):
    ids = [10**9]
    try:
        expected = hf_tokenizer.decode(ids)
    except Exception as error:  # whatever HF does, the accelerated tokenizer does the same
        with pytest.raises(type(error)):
            fast_tokenizer.decode(ids)
    else:
        assert fast_tokenizer.decode(ids) == expected


# -- 6. special and added tokens, including tokens added after accelerate() -------------------


def test_tokens_added_after_accelerate_are_honoured(fresh_pair):
    hf, fast = fresh_pair
    text = "call <my_tool> with [[SECRET]] and <my_tool>x"
    fast.add_tokens(["<my_tool>"])
    fast.add_special_tokens({"additional_special_tokens": ["[[SECRET]]"]})
    reference = tokbackend.load_hf("qwen3")
    reference.add_tokens(["<my_tool>"])
    reference.add_special_tokens({"additional_special_tokens": ["[[SECRET]]"]})
    assert fast.encode(text) == reference.encode(text)
    assert len(set(fast.encode(text)) & {len(reference) - 1, len(reference) - 2}) == 2
    assert fast.tokbackend.stats()["fallbacks"] == {}


def test_tokens_added_through_the_original_object_are_seen(fresh_pair):
    hf, fast = fresh_pair
    hf.add_tokens(["<from_original>"])
    assert fast.encode("a<from_original>b") == hf.encode("a<from_original>b")
    assert hf.convert_tokens_to_ids("<from_original>") in fast.encode("a<from_original>b")


def test_bos_eos_post_processor_is_reproduced(fresh_pair):
    hf, fast = fresh_pair
    hf.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A <|im_end|>",
        special_tokens=[("<|endoftext|>", 151643), ("<|im_end|>", 151645)],
    )
    for text in TEXTS:
        assert fast.encode(text) == hf.encode(text)
        assert fast.encode(text)[0] == 151643 and fast.encode(text)[-1] == 151645
        assert fast.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False)
    assert fast.tokbackend.stats()["fallbacks"] == {}


# -- 7. the object itself ---------------------------------------------------------------------


def test_accelerated_object_is_a_subclass_of_the_original(hf_tokenizer, fast_tokenizer):
    assert isinstance(fast_tokenizer, type(hf_tokenizer))
    assert isinstance(fast_tokenizer, AcceleratedTokenizerMixin)
    assert type(fast_tokenizer).__name__ == type(hf_tokenizer).__name__
    assert not isinstance(hf_tokenizer, AcceleratedTokenizerMixin)  # the original is left as it was
    assert fast_tokenizer.is_fast


def test_pickle_and_deepcopy_stay_accelerated_and_exact(fresh_pair):
    hf, fast = fresh_pair
    fast.add_tokens(["<kept>"])
    for clone in (pickle.loads(pickle.dumps(fast)), copy.deepcopy(fast)):
        assert isinstance(clone, AcceleratedTokenizerMixin)
        assert clone.tokbackend.fast_path_enabled
        before = clone.tokbackend.stats()["fast_texts"]
        assert clone.encode("x<kept>y " + TEXTS[4][:2000]) == hf.encode("x<kept>y " + TEXTS[4][:2000])
        assert clone.tokbackend.stats()["fast_texts"] == before + 1


def test_reaccelerating_uses_the_plain_tokenizer(fast_tokenizer, hf_tokenizer):
    again = tokbackend.accelerate(fast_tokenizer, backend="hf")
    assert again.tokbackend.options.backend == "hf"
    assert type(again).__mro__[1:3] == (AcceleratedTokenizerMixin, type(hf_tokenizer))
    assert again.encode(TEXTS[4]) == hf_tokenizer.encode(TEXTS[4])


def test_load_accelerates_builtin_models():
    tokenizer = tokbackend.load("qwen3")
    assert tokenizer.tokbackend.options.backend == "auto"
    assert tokenizer.tokbackend.stats()["routing"]["backend"] in ("gigatoken", "fastokens")
    assert tokenizer.encode("Hello") == [9707]


# -- 8. arguments HF validates, and results as rich as HF's ------------------------------------


def test_every_call_gets_hfs_ids_or_hfs_exception(hf_tokenizer, fast_tokenizer):
    """Calls drawn from the values HF's own checks distinguish (non-bool flags, negative and huge
    lengths, strides past the length, strings where ints go, every text shape): the same result
    or the same exception class as HF, never ids where HF raises."""
    from tokbackend.equivalence.arguments import calls, outcome

    added = [str(token) for token in hf_tokenizer.added_tokens_decoder.values()]
    profile = settings(settings.get_profile("ci"), max_examples=400)
    mismatch = find_mismatch(
        lambda call: list(outcome(hf_tokenizer, call)),
        lambda call: list(outcome(fast_tokenizer, call)),
        calls(added),
        "calls",
        profile,
    )
    assert mismatch is None, mismatch.report()


@pytest.mark.parametrize(
    "call",
    [
        lambda tok: tok(TEXTS[0]),
        lambda tok: tok(TEXTS[:3]),
        lambda tok: tok(TEXTS[1], add_special_tokens=False, return_attention_mask=False),
        lambda tok: tok(TEXTS[4], truncation=True, max_length=100_000),
        lambda tok: tok(("a <|im_end|>", "b")),
        lambda tok: tok(""),
    ],
    ids=["single", "batch", "no-mask", "truncation-that-fits", "tuple", "empty"],
)
def test_a_fast_result_offers_what_hfs_does(hf_tokenizer, fast_tokenizer, call):
    from tokbackend.equivalence.surface import surface

    before = fast_counts(fast_tokenizer)[0]
    ours = call(fast_tokenizer)
    assert fast_counts(fast_tokenizer)[0] > before, "the backend answered none of it: the test proves nothing"
    assert surface(ours) == surface(call(hf_tokenizer))
    again = pickle.loads(pickle.dumps(ours))
    assert type(again).__name__ == "BatchEncoding" and again.encodings[0].ids == ours.encodings[0].ids


def test_its_encodings_are_computed_only_when_asked_for(fresh_pair):
    hf, fast = fresh_pair
    result = fast("hello <|im_end|> there")
    assert result.n_sequences == 1 and result["input_ids"] == hf("hello <|im_end|> there")["input_ids"]
    assert dict(result) == dict(hf("hello <|im_end|> there"))
    # nothing computed by reading the ids, dict(), n_sequences (read past the descriptor, which computes)
    assert type(result.__dict__["_encodings"]).__name__ == "_Pending"
    assert result.tokens() == ["hello", "Ġ", "<|im_end|>", "Ġthere"] and type(result.__dict__["_encodings"]) is list


def test_its_encodings_are_a_plain_list_even_to_c_code(fresh_pair):
    """C code reads a list's storage directly: a list subclass that fills itself on a Python
    method call read as empty there (`[None] + result.encodings` had 1 element, HF's 4)."""
    import operator

    hf, fast = fresh_pair
    texts = ["hello world", "another text here", "third"]
    for read in (
        lambda result: type(result.encodings),
        lambda result: [type(item) for item in [None] + result.encodings],
        lambda result: len(operator.concat(result.encodings, [])),
        lambda result: len(list.__add__([], result.encodings)),
        lambda result: [encoding.ids for encoding in tuple(result.encodings)],
        lambda result: result[1].ids,
        lambda result: (result.is_fast, result.tokens(2)),
    ):
        ours = fast(texts)
        assert fast.tokbackend.stats()["fast_texts"] > 0
        assert read(ours) == read(hf(texts))
    assert type(fast("one text").encodings) is list and len(fast("one text").encodings) == 1


def test_hfs_own_results_read_as_before(hf_tokenizer):
    """The one descriptor installed on BatchEncoding returns what HF stored, untouched."""
    import copy
    import pickle

    from transformers.tokenization_utils_base import BatchEncoding

    import tokbackend._lazy_encodings  # noqa: F401 - installs it

    plain = BatchEncoding({"input_ids": [1, 2]})
    assert plain.encodings is None and not plain.is_fast and plain._encodings is None
    result = hf_tokenizer(["a b", "c"])
    stored = result.__dict__["_encodings"]
    assert result.encodings is stored and type(stored) is list
    for copied in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result), copy.copy(result)):
        assert type(copied) is BatchEncoding and [e.ids for e in copied.encodings] == [e.ids for e in stored]
    del result._encodings
    assert not hasattr(result, "_encodings")


def test_the_assistant_tokens_mask_is_hfs(hf_tokenizer, fast_tokenizer):
    template = (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] }}{% endgeneration %}"
        "{% else %}{{ message['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
    )
    messages = [{"role": "user", "content": TEXTS[0]}, {"role": "assistant", "content": TEXTS[3]}]
    kwargs = {"chat_template": template, "tokenize": True, "return_dict": True, "return_assistant_tokens_mask": True}
    before = fast_counts(fast_tokenizer)[0]
    ours = fast_tokenizer.apply_chat_template(messages, **kwargs)
    theirs = hf_tokenizer.apply_chat_template(messages, **kwargs)
    assert dict(ours) == dict(theirs) and 1 in ours["assistant_masks"]
    assert fast_counts(fast_tokenizer)[0] == before + 1


def test_encode_takes_hfs_arguments_in_hfs_order(hf_tokenizer, fast_tokenizer):
    import inspect

    def parameters(function):
        return [
            (name, parameter.kind, parameter.default)
            for name, parameter in inspect.signature(function).parameters.items()
        ]

    assert parameters(type(fast_tokenizer).encode) == parameters(type(hf_tokenizer).encode)
    positional = ("hello world", None, True, False, True, 60, 2)
    assert fast_tokenizer.encode(*positional) == hf_tokenizer.encode(*positional)
    with pytest.raises(TypeError) as ours:
        fast_tokenizer.encode("x", padding_strategy=1)
    with pytest.raises(TypeError) as theirs:
        hf_tokenizer.encode("x", padding_strategy=1)
    assert str(ours.value) == str(theirs.value)  # names HF's method, not tokbackend's


# -- the hot path's Python frames ------------------------------------------------------------

# At most this many Python frames (sys.setprofile "call" events) for a call the backend answers
# on a final build, a short text (plain HF: 36, 37, 35). Counted, not timed: the count is the
# same on every machine, and it is what per-call overhead is made of. prometheus_client's frames
# are counted apart (`metrics_calls_per_call`): with it, each call makes exactly one counter
# increment and one histogram observation (docs/metrics.md), nothing more of ours.
FRAME_LIMITS = {"encode(text)": 20, "tok(text)": 45, "tok(batch of 8)": 55}


def _metrics_frame(frame) -> bool:
    return "prometheus_client" in frame.f_code.co_filename


def frames_per_call(tokenizer, metrics_calls: dict[str, list[str]] | None = None) -> dict[str, int]:
    """The Python frames of each call, prometheus_client's left out; `metrics_calls` gets the
    prometheus_client functions each call entered from outside it."""
    text = "Hello world, how are you?"
    batch = [f"{text} {index}" for index in range(8)]
    calls = {
        "encode(text)": lambda: tokenizer.encode(text),
        "tok(text)": lambda: tokenizer(text),
        "tok(batch of 8)": lambda: tokenizer(batch),
    }
    counts = {}
    for name, call in calls.items():
        for _ in range(3):
            call()  # warm: a first call may build or import
        seen: list[str] = []
        entered: list[str] = []

        def profile(frame, event, arg, seen=seen, entered=entered):
            if event != "call":
                return
            if not _metrics_frame(frame):
                seen.append(frame.f_code.co_name)
            elif not _metrics_frame(frame.f_back):
                entered.append(frame.f_code.co_name)

        sys.setprofile(profile)
        try:
            call()
        finally:
            sys.setprofile(None)
        counts[name] = len(seen) - 1  # the lambda around the call
        if metrics_calls is not None:
            metrics_calls[name] = entered
    return counts


def test_the_hot_path_stays_thin(fast_tokenizer):
    served = fast_tokenizer.tokbackend.stats()["fast_texts"]
    metrics_calls: dict[str, list[str]] = {}
    counts = frames_per_call(fast_tokenizer, metrics_calls)
    assert fast_tokenizer.tokbackend.stats()["fast_texts"] >= served + 9 * 4, "the backend answered none of it"
    assert all(counts[name] <= limit for name, limit in FRAME_LIMITS.items()), counts
    once = [] if fast_tokenizer.tokbackend.metrics is None else ["inc", "observe"]  # the counter, the histogram
    assert metrics_calls == dict.fromkeys(FRAME_LIMITS, once), metrics_calls


def test_the_frame_count_sees_a_heavier_path(fast_tokenizer, monkeypatch):
    """Planted: a policy that walks each text in Python (what a batch's per-row work looked like)."""
    import tokbackend._policy

    original = tokbackend._policy.fast_path_reason

    def per_row(text, *args):
        if type(text) is list:
            for item in text:
                for _ in range(4):
                    (lambda: item)()
        return original(text, *args)

    monkeypatch.setattr(tokbackend._tokenizer, "fast_path_reason", per_row)
    counts = frames_per_call(fast_tokenizer)
    assert counts["tok(batch of 8)"] > FRAME_LIMITS["tok(batch of 8)"], counts
