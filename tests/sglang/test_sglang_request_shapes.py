"""Which ids SGLang's tokenizer manager gets from the accelerated tokenizer, request shape by
request shape, through its real code: `array('q')` straight from the backend where SGLang turns
the ids into `array("q")` itself (text prompts), lists everywhere else (chat, which adds to
them), and in every case exactly HF's ids in the type SGLang expects there."""

from __future__ import annotations

import asyncio
import contextvars
from array import array

import pytest

import tokbackend._tokenizer
from tokbackend.equivalence.corpus import prompt_text

GUARDED = "\u017f long s and ſ"  # a code point both backends' guards send to HuggingFace


def _tokenize_only(manager, obj):
    """What `generate_request` does before it sends: normalize, request state, tokenize."""
    obj.normalize_batch_and_arguments()
    manager._init_req_state(obj)
    try:
        return asyncio.run(manager._tokenize_one_request(obj))
    finally:
        manager.rid_to_state.pop(obj.rid, None)


def _request(**fields):
    from sglang.srt.managers.io_struct import GenerateReqInput

    return GenerateReqInput(sampling_params={"max_new_tokens": 8, "temperature": 0}, **fields)


def _arrays_served(manager) -> int:
    return manager.tokenizer.tokbackend.stats()["fast_texts_as_arrays"]


def _is_q_array(ids) -> bool:
    return type(ids) is array and ids.typecode == "q"


@pytest.mark.parametrize("text", [prompt_text(7, 40_000, "mixed"), "Hello", GUARDED, "a<|im_end|>b " * 50])
def test_a_text_prompt_reaches_the_scheduler_as_an_array_from_the_backend(tokenizer_manager, hf_reference, text):
    before = _arrays_served(tokenizer_manager)
    tokenized = _tokenize_only(tokenizer_manager, _request(text=text))
    assert _is_q_array(tokenized.input_ids)
    assert tokenized.input_ids.tolist() == hf_reference.encode(text)
    if text != GUARDED:  # HF answered the guarded one; its list was converted by SGLang
        assert _arrays_served(tokenizer_manager) == before + 1


def test_a_batch_gets_one_array_per_text(tokenizer_manager, hf_reference):
    texts = [prompt_text(seed, 3000, "mixed") for seed in range(5)] + [GUARDED]
    input_ids, _ = asyncio.run(tokenizer_manager._tokenize_texts(texts))
    assert all(map(_is_q_array, input_ids))
    assert [ids.tolist() for ids in input_ids] == hf_reference(texts)["input_ids"]


def test_the_batch_encode_option_sends_arrays_equal_to_hf(tokenizer_manager, hf_reference):
    """--enable-tokenizer-batch-encode: one tokenizer call for the batch, one object per text."""
    texts = [prompt_text(seed, 2000, "prose") for seed in range(10, 14)]
    obj = _request(text=texts)
    obj.normalize_batch_and_arguments()
    for index in range(len(texts)):
        tokenizer_manager._init_req_state(obj[index])
    try:
        tokenized = asyncio.run(tokenizer_manager._batch_tokenize_and_process(len(texts), obj))
    finally:
        tokenizer_manager.rid_to_state.clear()
    assert [item.input_ids.tolist() for item in tokenized] == [hf_reference.encode(text) for text in texts]
    assert all(_is_q_array(item.input_ids) for item in tokenized)


def test_user_supplied_ids_logprobs_and_sessions_keep_their_meaning(tokenizer_manager, hf_reference):
    short = prompt_text(21, 1500, "code")
    expected = hf_reference.encode(short)
    before = tokenizer_manager.tokenizer.tokbackend.stats()["fast_texts"]
    given = _tokenize_only(tokenizer_manager, _request(input_ids=list(expected)))
    assert given.input_ids.tolist() == expected
    assert tokenizer_manager.tokenizer.tokbackend.stats()["fast_texts"] == before  # nothing encoded
    logprobs = _tokenize_only(
        tokenizer_manager, _request(text=short, return_logprob=True, logprob_start_len=0, top_logprobs_num=2)
    )
    assert (logprobs.return_logprob, logprobs.logprob_start_len, logprobs.top_logprobs_num) == (True, 0, 2)
    assert _is_q_array(logprobs.input_ids) and logprobs.input_ids.tolist() == expected
    session = _tokenize_only(
        tokenizer_manager,
        _request(text=short, session_params={"id": "s1", "rid": None, "offset": None, "replace": False}),
    )
    assert session.session_params is not None and session.input_ids.tolist() == expected  # this turn's text only


def _check_chat(tokenizer_manager, hf_reference, model_dir):
    """OpenAI chat: SGLang encodes the rendered prompt itself and adds to the ids (`prompt_ids +
    encode(prefix)`), so they must be a list; the request then carries them to the manager."""
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
    from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat

    try:
        from sglang.srt.parser.template_manager import TemplateManager
    except ImportError:  # 0.5.15.post1 and before
        from sglang.srt.managers.template_manager import TemplateManager

    templates = TemplateManager()
    templates.initialize_templates(tokenizer_manager, model_path=model_dir)
    serving = OpenAIServingChat(tokenizer_manager, templates)
    messages = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": prompt_text(3, 40_000, "mixed")},
    ]
    request = ChatCompletionRequest(model=model_dir, messages=messages, max_tokens=8)
    result = serving._process_messages(request, is_multimodal=False)
    expected = hf_reference.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    assert type(result.prompt_ids) is list, type(result.prompt_ids)
    assert result.prompt_ids == expected
    tokenized = _tokenize_only(tokenizer_manager, _request(input_ids=result.prompt_ids))
    assert tokenized.input_ids.tolist() == expected


def test_chat_gets_lists_and_reaches_the_scheduler_as_hfs_ids(tokenizer_manager, hf_reference, model_dir):
    _check_chat(tokenizer_manager, hf_reference, model_dir)


def test_arrays_where_sglang_expects_a_list_are_caught(tokenizer_manager, hf_reference, model_dir, monkeypatch):
    """The planted defect: the shortcut everywhere (arrays for every encode), not only where
    SGLang makes arrays itself. The chat check sees it."""
    monkeypatch.setattr(
        tokbackend._tokenizer, "_mode", contextvars.ContextVar("planted", default=tokbackend._tokenizer._ARRAYS)
    )
    with pytest.raises((AssertionError, TypeError)):
        _check_chat(tokenizer_manager, hf_reference, model_dir)


def test_multi_tokenizer_workers_take_the_same_shortcut(plugins_loaded):
    """Each `--tokenizer-worker-num` worker is a TokenizerWorker, a TokenizerManager subclass:
    it tokenizes through the hooked method."""
    from sglang.srt.managers.multi_tokenizer_mixin import TokenizerWorker
    from sglang.srt.managers.tokenizer_manager import TokenizerManager

    method = TokenizerWorker._tokenize_texts
    assert method is TokenizerManager._tokenize_texts
    assert method.__code__.co_filename.endswith("tokbackend/integrations/sglang.py") or hasattr(method, "__wrapped__")
    assert not method.__code__.co_filename.endswith("tokenizer_manager.py")
