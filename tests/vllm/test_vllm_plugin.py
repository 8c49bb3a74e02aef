"""`--tokenizer-mode gigatoken` through real vLLM code (0.33.0 and 0.34.0, one CI stage each): plugin loading,
the CLI, the tokenizer registry, the completions and chat renderers with vLLM's own kwargs, the thread pool,
structured output from the engine core's tokenizer, and the detokenizer."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from conftest import MAX_MODEL_LEN, vllm_config

from tokbackend._tokenizer import AcceleratedTokenizerMixin

TEXTS = [
    "Hello! 毕老师！1 + 1 = 2",
    "def f(x):\n    return x ** 2  # résumé e\u0301 \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "don't stop 12345678 \u3000 tabs\tand\r\nnewlines",
]


def _counts(tokenizer) -> tuple[int, dict[str, int]]:
    stats = tokenizer.tokbackend.stats()
    return stats["fast_texts"], stats["fallbacks"]


def test_the_plugin_is_a_vllm_entry_point():
    names = {entry.name: entry.value for entry in entry_points(group="vllm.general_plugins")}
    assert names.get("tokbackend") == "tokbackend.integrations.vllm:register"


@pytest.mark.parametrize("mode", ["gigatoken", "tokbackend-fastokens", "tokbackend-auto"])
def test_the_cli_parses_the_mode(mode, model_dir, plugins_loaded):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    arguments = parser.parse_args(["--model", model_dir, "--tokenizer-mode", mode])
    assert arguments.tokenizer_mode == mode
    assert AsyncEngineArgs.from_cli_args(arguments).create_model_config().tokenizer_mode == mode


def test_a_typo_fails_at_load_with_our_modes_named(model_dir, plugins_loaded):
    from vllm.tokenizers.registry import get_tokenizer

    with pytest.raises(ValueError, match="No tokenizer registered.*Did you mean 'gigatoken'"):
        get_tokenizer(model_dir, tokenizer_mode="gigatokn")


def test_the_plugin_warns_at_registration_where_vllms_rust_frontend_serves(plugins_loaded, monkeypatch, caplog):
    """VLLM_USE_RUST_FRONTEND=1, which vLLM reads as on, has `vllm serve` start its Rust frontend as
    the API server: registering the plugin says so, naming the variable and the flag; unset (or 0)
    it says nothing."""
    import vllm.envs as envs

    from tokbackend.integrations import vllm as plugin

    def warnings_naming_it(value: str) -> list[str]:
        monkeypatch.setenv("VLLM_USE_RUST_FRONTEND", value)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tokbackend"):
            plugin.register()
        return [record.getMessage() for record in caplog.records if "VLLM_USE_RUST_FRONTEND" in record.getMessage()]

    assert warnings_naming_it("0") == []
    found = warnings_naming_it("1")
    assert len(found) == 1, f"one warning naming VLLM_USE_RUST_FRONTEND, not {found}"
    message = found[0]
    assert envs.VLLM_USE_RUST_FRONTEND, "vLLM no longer reads VLLM_USE_RUST_FRONTEND=1 as on"
    assert message.startswith("VLLM_USE_RUST_FRONTEND=1: the server tokenizes requests in Rust"), message
    assert "--tokenizer-mode gigatoken (or tokbackend-*) cannot apply" in message, message
    assert "unknown renderer" in message, message


@pytest.mark.parametrize("mode", ["gigatoken", "tokbackend-auto"])
def test_vllms_rust_frontend_refuses_our_modes_at_start_up(mode, model_dir, plugins_loaded):
    """What the warning says of the Rust frontend: vllm-rs, which VLLM_USE_RUST_FRONTEND=1 starts in
    place of the Python API server, stops on `--tokenizer-mode gigatoken` before it serves,
    given its arguments as `vllm serve` hands them over (vLLM's RustFrontendProcessManager)."""
    import vllm
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.entrypoints.common.startup import jsonify_non_default_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    arguments = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(
        ["--model", model_dir, "--tokenizer-mode", mode]
    )
    handed_over = json.dumps(
        {**jsonify_non_default_args(arguments, exclude={"api_server_count"}), "model_tag": model_dir}
    )
    descriptors = ["--listen-fd", "0", "--input-listener-fd", "0", "--output-listener-fd", "0"]
    command = [str(Path(vllm.__file__).parent / "vllm-rs"), "frontend", *descriptors, "--args-json", handed_over]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert completed.returncode != 0
    assert f"unknown renderer `{mode}`" in completed.stderr, completed.stderr[-2000:]


def test_a_fresh_interpreter_loading_only_vllms_plugins_gets_an_exact_accelerated_tokenizer(model_dir, hf_reference):
    code = (
        "from vllm.plugins import load_general_plugins; load_general_plugins(); "
        "from tokbackend._process import preload; assert preload.started(), 'the plugin did not start the preload'; "
        "from vllm.tokenizers.registry import get_tokenizer, cached_tokenizer_from_config; "
        "from conftest import vllm_config; "
        f"texts = {TEXTS!r}; "
        f"a = get_tokenizer({model_dir!r}, tokenizer_mode='gigatoken'); "
        f"b = cached_tokenizer_from_config(vllm_config({model_dir!r}, 'tokbackend-fastokens').model_config); "
        "print('IDS', [[t.encode(x) for x in texts] for t in (a, b)]); "
        "print('STATE', [t.tokbackend.stats()['routing']['backend'] for t in (a, b)], "
        "[t.tokbackend.stats()['fast_texts'] for t in (a, b)], a.max_token_id)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=__file__.rsplit("/", 1)[0]
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    expected = [hf_reference.encode(text) for text in TEXTS]
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in completed.stdout.splitlines() if " " in line}
    assert eval(lines["IDS"]) == [expected, expected]
    assert lines["STATE"].startswith("['gigatoken', 'fastokens'] [3, 3] 248076")
    # one start-up line per process, naming the backend
    assert (
        "vLLM" in completed.stderr and "tokenizer for" in completed.stderr and "backend gigatoken" in completed.stderr
    )


def test_completions_encode_on_the_fast_path_with_vllms_kwargs(renderer, hf_reference):
    tokenizer = renderer.get_tokenizer()
    kwargs = renderer.default_cmpl_tok_params.get_encode_kwargs()
    assert kwargs == {"truncation": True, "max_length": MAX_MODEL_LEN + 1, "add_special_tokens": True}
    fast_before, fallbacks_before = _counts(tokenizer)
    out = renderer.render_cmpl([{"prompt": text} for text in TEXTS])
    assert [item["prompt_token_ids"] for item in out] == [hf_reference(text, **kwargs)["input_ids"] for text in TEXTS]
    fast_after, fallbacks_after = _counts(tokenizer)
    assert fast_after == fast_before + len(TEXTS)
    assert fallbacks_after.get("truncation", 0) == fallbacks_before.get("truncation", 0)


def test_a_prompt_that_does_not_fit_is_truncated_exactly_like_hf(renderer, hf_reference):
    tokenizer = renderer.get_tokenizer()
    long = " ".join(TEXTS) * 400
    kwargs = renderer.default_cmpl_tok_params.get_encode_kwargs()
    assert len(hf_reference.encode(long)) > kwargs["max_length"]
    before = _counts(tokenizer)[1].get("truncation", 0)
    ours = tokenizer(long, **kwargs)["input_ids"]
    assert ours == hf_reference(long, **kwargs)["input_ids"]  # cut from the left, as vLLM asks
    assert len(ours) == kwargs["max_length"]
    assert _counts(tokenizer)[1]["truncation"] == before + 1


def test_chat_renders_and_encodes_exactly(renderer, hf_reference):
    from vllm.renderers import ChatParams

    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": TEXTS[0]}]
    tokenizer = renderer.get_tokenizer()
    before = _counts(tokenizer)[0]
    _, engine_prompts = renderer.render_chat(
        [messages], ChatParams(chat_template_kwargs={"add_generation_prompt": True})
    )
    expected = hf_reference.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    assert engine_prompts[0]["prompt_token_ids"] == expected
    assert _counts(tokenizer)[0] == before + 1


def test_the_thread_pool_keeps_the_acceleration_and_shares_one_backend(renderer):
    tokenizer = renderer.get_tokenizer()
    assert type(tokenizer).__name__.startswith("TokenizerPool")
    assert isinstance(tokenizer, AcceleratedTokenizerMixin)
    assert tokenizer.max_token_id == 248076  # vLLM's cached layer survives every copy
    copies = list(tokenizer._pool.queue) if hasattr(tokenizer, "_pool") else []
    lanes = {id(copy.tokbackend.routing.lane.backend) for copy in copies} | {
        id(tokenizer.tokbackend.routing.lane.backend)
    }
    assert len(lanes) == 1
    assert all(copy.tokbackend.counters is tokenizer.tokbackend.counters for copy in copies)


def _engine_core_loads_a_tokenizer(model_dir):
    """What vLLM's engine core process does at start: its structured-output manager loads the
    tokenizer (vLLM's own code; the cache of loads emptied, as in a fresh engine-core process)."""
    from vllm.tokenizers.registry import cached_get_tokenizer
    from vllm.v1.structured_output import StructuredOutputManager

    config = vllm_config(model_dir, "gigatoken")
    cached_get_tokenizer.cache_clear()
    return config, StructuredOutputManager(config).tokenizer


def _check_the_engine_core_builds_nothing(model_dir, hf_reference):
    tokenizer = _engine_core_loads_a_tokenizer(model_dir)[1]
    # HuggingFace's own tokenizer: no build at start-up, none later on the engine core's thread
    assert not isinstance(tokenizer, AcceleratedTokenizerMixin), tokenizer.tokbackend.describe()
    long_text = "".join(TEXTS) * 200
    for text in [*TEXTS, long_text]:
        assert tokenizer.encode(text, add_special_tokens=False) == hf_reference.encode(text, add_special_tokens=False)


def test_the_engine_core_keeps_huggingface_and_builds_nothing(model_dir, plugins_loaded, hf_reference):
    """The engine core encodes no prompts (the API process sends ids): with the mode it loads what
    stock loads, and its few encodes are HuggingFace's."""
    _check_the_engine_core_builds_nothing(model_dir, hf_reference)


def test_the_engine_core_check_fails_where_every_process_builds(model_dir, plugins_loaded, hf_reference, monkeypatch):
    from defects import eager_build_in_every_process

    from tokbackend.integrations import vllm as plugin

    eager_build_in_every_process(monkeypatch, plugin)
    with pytest.raises(AssertionError):
        _check_the_engine_core_builds_nothing(model_dir, hf_reference)


# vLLM's engine core, whose `EngineCore.__init__` loads the plugins first in its process
_ENGINE_CORE = ("vllm.v1.engine.core", "entry.EngineCore(None, None, False)")


def test_the_engine_core_process_preloads_nothing_for_a_build():
    """The engine core never builds: loading the plugins there imports nothing for a build; a
    process loading only the plugins does (the fresh-interpreter test above)."""
    from defects import preload_started_in

    assert not preload_started_in("tokbackend.integrations.vllm", *_ENGINE_CORE)


def test_the_engine_core_preload_check_fails_where_every_process_preloads():
    from defects import preload_started_in

    assert preload_started_in("tokbackend.integrations.vllm", *_ENGINE_CORE, defect=True)


def test_structured_output_builds_grammars_from_the_engine_cores_tokenizer(model_dir, plugins_loaded):
    from vllm.v1.structured_output.backend_guidance import GuidanceBackend
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions
    from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend

    config, tokenizer = _engine_core_loads_a_tokenizer(model_dir)
    assert GuidanceBackend.is_tokenizer_supported(tokenizer)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    answer = tokenizer.encode('{"name": "Ada", "age": 36}', add_special_tokens=False)
    for backend_class in (XgrammarBackend, GuidanceBackend):
        backend = backend_class(config, tokenizer=tokenizer, vocab_size=config.model_config.get_vocab_size())
        grammar = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(schema))
        assert grammar.accept_tokens("conforming", answer), backend_class.__name__
        rejecting = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(schema))
        assert not rejecting.accept_tokens("free text", tokenizer.encode("hello", add_special_tokens=False))


@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_the_detokenizer_streams_through_hf(renderer, hf_reference, skip_special_tokens):
    import time

    from vllm.sampling_params import SamplingParams
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.detokenizer import FastIncrementalDetokenizer, IncrementalDetokenizer

    tokenizer = renderer.get_tokenizer()
    prompt = tokenizer.encode("Write a haiku:", add_special_tokens=False)
    output = hf_reference.encode(" Autumn moonlight — ünïcödé 日本語 🙂<|im_end|>", add_special_tokens=False)
    request = EngineCoreRequest(
        request_id="r",
        prompt_token_ids=prompt,
        mm_features=None,
        sampling_params=SamplingParams(skip_special_tokens=skip_special_tokens, max_tokens=64),
        pooling_params=None,
        arrival_time=time.time(),
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
    )
    detokenizer = IncrementalDetokenizer.from_new_request(tokenizer, request)
    assert isinstance(detokenizer, FastIncrementalDetokenizer)  # HF's Rust DecodeStream on _tokenizer
    for token in output:  # one token at a time, as the engine streams them
        detokenizer.update([token], False)
    expected = hf_reference.decode(output, skip_special_tokens=skip_special_tokens)
    assert detokenizer.get_next_output_text(True, False) == expected


def test_a_pipeline_no_record_covers_is_derived_and_final_through_vllm(plugins_loaded, tmp_path, monkeypatch):
    """A model of the user's own: through vLLM's tokenizer registry the installed package derives
    its guard (from the Unicode history shipped in the wheel), serves HF's ids at once and
    finishes its start-up build before it serves."""
    from transformers import AutoTokenizer
    from vllm.tokenizers.registry import get_tokenizer

    from tokbackend.equivalence.server_models import own_pipeline_model

    directory = str(own_pipeline_model(tmp_path / "own-model"))
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "fresh-cache"))
    hf = AutoTokenizer.from_pretrained(directory)
    tokenizer = get_tokenizer(directory, tokenizer_mode="tokbackend-auto")
    stats = tokenizer.tokbackend.stats()  # a server process serves with the final build
    assert stats["start_up"] == {"phase": "final"}, stats
    assert str(tmp_path / "fresh-cache") in stats["guard"], stats
    texts = [*TEXTS, "12345678 ſ's"]
    assert [tokenizer.encode(text) for text in texts] == [hf.encode(text) for text in texts]


def test_a_failure_building_the_fast_path_stops_start_up(plugins_loaded, tmp_path, monkeypatch):
    """Planted: the guard's derivation raises (as where a wheel lacked the package data every
    derivation reads). vLLM's tokenizer load stops with the reason rather
    than serving every call with HF behind a start-up line that named the fast path."""
    from defects import finish_without_package_data
    from vllm.tokenizers.registry import get_tokenizer

    from tokbackend.equivalence.server_models import own_pipeline_model

    directory = str(own_pipeline_model(tmp_path / "own-model"))
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "fresh-cache"))
    finish_without_package_data(monkeypatch)
    with pytest.raises(RuntimeError, match="cannot serve .*lane failed: FileNotFoundError: planted.*Remove the flag"):
        get_tokenizer(directory, tokenizer_mode="tokbackend-auto")
