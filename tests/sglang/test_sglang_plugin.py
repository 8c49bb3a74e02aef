"""`--tokenizer-backend gigatoken` through real SGLang code: flag, tokenizer manager, chat
serving, grammar backends, detokenizer, spawned children, multi-tokenizer workers."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest

from tokbackend._tokenizer import AcceleratedTokenizerMixin
from tokbackend.integrations import sglang as plugin
from tokbackend.integrations._common import ALLOW_FALLBACK_ENV

# Before 0.5.19 ServerArgs resolves the device in __post_init__ and finds none on a CPU host.
CPU = ["--device", "cpu"]

TEXTS = [
    "Hello! 毕老师！1 + 1 = 2",
    '<|im_start|>user\n<think>plan</think> call <tool_call>{"a": 1}</tool_call><|im_end|>',
    "def f(x):\n    return x ** 2  # résumé e\u0301 \U0001f468\u200d\U0001f469\u200d\U0001f467",
]


def test_the_plugin_is_an_sglang_entry_point():
    names = {entry.name: entry.value for entry in entry_points(group="sglang.srt.plugins")}
    assert names.get("tokbackend") == "tokbackend.integrations.sglang:register"


def test_the_flag_accepts_gigatoken(model_dir, plugins_loaded):
    from sglang.srt.server_args import prepare_server_args

    arguments = prepare_server_args(["--model-path", model_dir, "--tokenizer-backend", "gigatoken", *CPU])
    assert arguments.tokenizer_backend == "gigatoken"
    with pytest.raises(SystemExit):
        prepare_server_args(["--model-path", model_dir, "--tokenizer-backend", "gigatokn", *CPU])


@pytest.mark.parametrize("value", ["tokbackend-fastokens", "tokbackend-auto", "fastokens"])
def test_other_backends_are_selectable_beside_sglangs_own_fastokens(model_dir, plugins_loaded, value):
    """Our values carry a prefix; SGLang's own "fastokens" (its global patch) stays SGLang's."""
    from sglang.srt.server_args import prepare_server_args

    arguments = prepare_server_args(["--model-path", model_dir, "--tokenizer-backend", value, *CPU])
    assert arguments.tokenizer_backend == value
    assert plugin.backend_for_flag(value) == (None if value == "fastokens" else value.removeprefix("tokbackend-"))


def test_tokbackend_fastokens_serves_through_get_tokenizer(model_dir, plugins_loaded, hf_reference):
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    tokenizer = get_tokenizer(model_dir, tokenizer_backend="tokbackend-fastokens")
    assert isinstance(tokenizer, AcceleratedTokenizerMixin)
    assert tokenizer.tokbackend.stats()["routing"]["backend"] == "fastokens"
    assert [tokenizer.encode(text) for text in TEXTS] == [hf_reference.encode(text) for text in TEXTS]


@pytest.mark.newest_release_in_ci
def test_a_second_get_tokenizer_in_one_process_shares_the_first_build(model_dir, plugins_loaded, hf_reference):
    """A process that loads the tokenizer twice (a tokenizer manager's tokenizer and processor):
    the second serves with the first one's build (no second backend load on the way to /health)."""
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    first = get_tokenizer(model_dir, tokenizer_backend="tokbackend-fastokens")
    second = get_tokenizer(model_dir, tokenizer_backend="tokbackend-fastokens")
    assert isinstance(second, AcceleratedTokenizerMixin) and second is not first
    assert second.tokbackend.build is first.tokbackend.build
    assert [second.encode(text) for text in TEXTS] == [hf_reference.encode(text) for text in TEXTS]
    other = get_tokenizer(model_dir, tokenizer_backend="gigatoken")
    assert other.tokbackend.build is not first.tokbackend.build


def test_tokenizer_manager_tokenizes_a_batch_through_the_fast_path(tokenizer_manager, hf_reference):
    tokenizer = tokenizer_manager.tokenizer
    assert isinstance(tokenizer, AcceleratedTokenizerMixin)
    before = tokenizer.tokbackend.stats()["fast_texts"]
    input_ids, _ = asyncio.run(tokenizer_manager._tokenize_texts(TEXTS))
    assert [list(ids) for ids in input_ids] == hf_reference(TEXTS)["input_ids"]
    assert tokenizer.tokbackend.stats()["fast_texts"] == before + len(TEXTS)


def test_openai_chat_request_is_encoded_exactly_through_the_fast_path(tokenizer_manager, hf_reference, model_dir):
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
        {"role": "user", "content": TEXTS[0] + " " + TEXTS[2] * 200},
    ]
    request = ChatCompletionRequest(model=model_dir, messages=messages, max_tokens=8)
    before = tokenizer_manager.tokenizer.tokbackend.stats()["fast_texts"]
    result = serving._process_messages(request, is_multimodal=False)
    expected = hf_reference.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    assert result.prompt_ids == expected
    assert tokenizer_manager.tokenizer.tokbackend.stats()["fast_texts"] > before


def test_grammar_backends_build_as_with_plain_hf(tokenizer_manager):
    from sglang.srt.constrained.llguidance_backend import GuidanceBackend
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    tokenizer = tokenizer_manager.tokenizer
    xgrammar_backend = XGrammarGrammarBackend(tokenizer, vocab_size=len(tokenizer))
    assert xgrammar_backend.grammar_compiler is not None
    guidance = GuidanceBackend(tokenizer)
    assert guidance.llguidance_tokenizer is not None


def _scheduler_loads_a_tokenizer(server_args):
    """What SGLang's scheduler does before its weights load: `Scheduler.init_tokenizer`, SGLang's
    own code, on a scheduler with only the attributes it reads."""
    from sglang.srt.managers.scheduler import Scheduler

    scheduler = SimpleNamespace(
        server_args=server_args,
        model_config=SimpleNamespace(is_generation=True, is_multimodal=False),
        skip_tokenizer_init=False,
    )
    Scheduler.init_tokenizer(scheduler)
    return scheduler.tokenizer


def _check_the_scheduler_builds_nothing(server_args, hf_reference):
    tokenizer = _scheduler_loads_a_tokenizer(server_args)
    # HuggingFace's own tokenizer: no build at start-up, none later on the scheduler's thread
    assert not isinstance(tokenizer, AcceleratedTokenizerMixin), tokenizer.tokbackend.describe()
    assert not hasattr(tokenizer, "tokbackend")
    long_text = "".join(TEXTS) * 200
    for text in [*TEXTS, long_text, "</think>"]:
        assert tokenizer.encode(text, add_special_tokens=False) == hf_reference.encode(text, add_special_tokens=False)


def test_the_scheduler_keeps_huggingface_and_builds_nothing(server_args, hf_reference):
    """The scheduler encodes no prompts (the tokenizer manager sends ids): with the flag it loads
    what stock loads, and its few encodes are HuggingFace's."""
    _check_the_scheduler_builds_nothing(server_args, hf_reference)


def test_the_scheduler_check_fails_where_every_process_builds(server_args, hf_reference, monkeypatch):
    from defects import eager_build_in_every_process

    eager_build_in_every_process(monkeypatch, plugin)
    with pytest.raises(AssertionError):
        _check_the_scheduler_builds_nothing(server_args, hf_reference)


# SGLang's scheduler process entry point, `run_scheduler_process`, which loads the plugins first
# (called with None for each of its parameters, which differ between releases)
_SCHEDULER = (
    "sglang.srt.managers.scheduler",
    "entry.run_scheduler_process(*[None] * sum(parameter.default is parameter.empty for parameter in "
    "inspect.signature(entry.run_scheduler_process).parameters.values()))",
)


def test_the_scheduler_process_preloads_nothing_for_a_build():
    """A scheduler process never builds: loading the plugins there imports nothing for a build
    (the backends' libraries, a derivation); a launcher's process does (`test_the_stock_cli_parses_the_flag`)."""
    from defects import preload_started_in

    assert not preload_started_in(plugin.__name__, *_SCHEDULER)


def test_the_preload_check_fails_where_every_process_preloads():
    from defects import preload_started_in

    assert preload_started_in(plugin.__name__, *_SCHEDULER, defect=True)


def _close_sockets(manager):
    """Close a manager's ZMQ sockets and end their context now: left to the garbage collector, the
    context's finalizer waits for sockets the same cycle still holds, and the test process hangs
    at whatever later allocation triggers that collection."""
    import zmq

    sockets = [value for value in vars(manager).values() if isinstance(value, zmq.Socket)]
    contexts = {id(socket.context): socket.context for socket in sockets}
    for socket in sockets:
        socket.close(linger=0)
    for context in contexts.values():
        context.term()


def test_detokenizer_decodes_through_hf(server_args, port_args, hf_reference):
    from sglang.srt.managers.detokenizer_manager import DetokenizerManager

    detokenizer = DetokenizerManager(server_args, port_args)
    tokenizer = detokenizer.tokenizer
    _close_sockets(detokenizer)
    # it decodes only: HuggingFace's own tokenizer, no build
    assert not isinstance(tokenizer, AcceleratedTokenizerMixin)
    assert type(tokenizer) is type(hf_reference)
    ids = hf_reference.encode(TEXTS[1] + TEXTS[2])
    assert tokenizer.decode(ids) == hf_reference.decode(ids)
    assert tokenizer.batch_decode([ids[:3], ids], skip_special_tokens=True) == hf_reference.batch_decode(
        [ids[:3], ids], skip_special_tokens=True
    )


def _child_loads_plugins_and_encodes(model_dir, queue):
    # What a process SGLang spawns does at start: load_plugins(), then build its tokenizer with
    # the backend from the server arguments (a multi-tokenizer worker's tokenizer manager).
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    tokenizer = get_tokenizer(model_dir, tokenizer_backend="gigatoken")
    queue.put((isinstance(tokenizer, AcceleratedTokenizerMixin), [tokenizer.encode(text) for text in TEXTS]))


def test_a_spawned_child_that_loads_plugins_gets_the_accelerated_tokenizer(model_dir, hf_reference):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_child_loads_plugins_and_encodes, args=(model_dir, queue))
    child.start()
    accelerated, ids = queue.get(timeout=300)
    child.join(timeout=60)
    assert accelerated
    assert ids == [hf_reference.encode(text) for text in TEXTS]


def test_multi_tokenizer_workers_load_the_plugin_through_the_app_path(model_dir, plugins_loaded):
    assert os.environ[plugin.APP_PATH_ENV] == plugin.TOKBACKEND_APP_PATH
    module, _, attribute = plugin.TOKBACKEND_APP_PATH.partition(":")
    # A fresh interpreter, as a uvicorn/granian worker is: importing the app path alone must
    # leave get_tokenizer accelerated.
    code = (
        f"import importlib; app = getattr(importlib.import_module({module!r}), {attribute!r}); "
        "from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer; "
        f"tokenizer = get_tokenizer({model_dir!r}, tokenizer_backend='gigatoken'); "
        "print('ACCELERATED', hasattr(tokenizer, 'tokbackend'), tokenizer.tokbackend.fast_path_enabled)"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    assert "ACCELERATED True True" in completed.stdout, completed.stderr[-3000:]


@pytest.mark.parametrize("value", ["1", "true"])
def test_loading_the_plugins_warns_where_sglangs_rust_server_tokenizes(value):
    """SGLANG_RUST_SERVER on (1, or another of SGLang's spellings) has SGLang tokenize in Rust, out
    of every hook's reach: a process loading the plugins says so, naming the variable and the flag."""
    code = "from sglang.srt.plugins import load_plugins; load_plugins()"
    environment = {**os.environ, "SGLANG_RUST_SERVER": value}
    completed = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=600, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"SGLANG_RUST_SERVER={value}: the server tokenizes requests in Rust" in completed.stderr, completed.stderr[
        -3000:
    ]
    assert "--tokenizer-backend gigatoken (or tokbackend-*) has no effect" in completed.stderr


@pytest.mark.newest_release_in_ci
def test_a_model_the_fast_path_cannot_serve_stops_start_up(model_dir, plugins_loaded, tmp_path, monkeypatch):
    import json
    import shutil

    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    broken = tmp_path / "lowercase-model"
    shutil.copytree(model_dir, broken)
    config = json.loads((broken / "tokenizer.json").read_text())
    config["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
    (broken / "tokenizer.json").write_text(json.dumps(config))
    with pytest.raises(RuntimeError, match="cannot serve.*Lowercase.*TOKBACKEND_ALLOW_HF_FALLBACK"):
        get_tokenizer(str(broken), tokenizer_backend="gigatoken")
    monkeypatch.setenv(ALLOW_FALLBACK_ENV, "1")
    tokenizer = get_tokenizer(str(broken), tokenizer_backend="gigatoken")
    assert not tokenizer.tokbackend.fast_path_enabled
    assert tokenizer.encode("HeLLo") == tokenizer.encode("hello")


def test_plain_huggingface_backend_is_left_alone(model_dir, plugins_loaded):
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    assert not isinstance(get_tokenizer(model_dir, tokenizer_backend="huggingface"), AcceleratedTokenizerMixin)


def test_the_stock_cli_parses_the_flag(model_dir):
    """`python -m sglang.launch_server ... --tokenizer-backend gigatoken` in a fresh process: its
    launcher loads the plugins (which start the backends' imports in the background), then
    parses (no wrapper around SGLang's own entry point)."""
    code = (
        "import sys; from sglang.srt.plugins import load_plugins; load_plugins(); "
        "from tokbackend._process import preload; assert preload.started(), 'the plugin did not start the preload'; "
        "from sglang.srt.server_args import prepare_server_args; "
        "print(prepare_server_args(sys.argv[1:]).tokenizer_backend)"
    )
    arguments = ["--model-path", model_dir, "--tokenizer-backend", "gigatoken", *CPU]
    completed = subprocess.run([sys.executable, "-c", code, *arguments], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip().splitlines()[-1] == "gigatoken"


def test_multi_worker_uvicorn_gets_an_app_that_loads_the_plugins(plugins_loaded):
    """Before 0.5.23 SGLang hands uvicorn its app path as a literal; the hook around uvicorn.run
    (applied by load_plugins: SGLang's http_server calls it through the module) swaps in ours
    when there is more than one worker (a single worker runs in the launcher's process)."""
    import uvicorn

    # SGLang's registry patches every module that holds the original (uvicorn.main too), so ask
    # where the code of what `uvicorn.run` now is lives
    assert not uvicorn.run.__code__.co_filename.endswith("uvicorn/main.py"), "uvicorn.run is not hooked"
    seen = []

    def record(app, *args, **kwargs):
        seen.append((app, kwargs.get("workers")))

    plugin._around_uvicorn_run(record, plugin.SGLANG_DEFAULT_APP_PATH, workers=2)
    plugin._around_uvicorn_run(record, plugin.SGLANG_DEFAULT_APP_PATH, workers=1)
    plugin._around_uvicorn_run(record, "my.own:app", workers=2)
    assert seen == [(plugin.TOKBACKEND_APP_PATH, 2), (plugin.SGLANG_DEFAULT_APP_PATH, 1), ("my.own:app", 2)]


@pytest.mark.newest_release_in_ci
def test_a_pipeline_no_record_covers_is_derived_and_final_through_sglang(plugins_loaded, tmp_path, monkeypatch):
    """A model of the user's own (Qwen3's vocabulary under a split regex of its own): through
    SGLang's `get_tokenizer` the installed package derives its guard (reading the Unicode history
    shipped in the wheel), serves HF's ids at once and finishes its start-up build before it serves."""
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer
    from transformers import AutoTokenizer

    from tokbackend.equivalence.server_models import own_pipeline_model

    directory = own_pipeline_model(tmp_path / "own-model")
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "fresh-cache"))
    hf = AutoTokenizer.from_pretrained(str(directory))
    tokenizer = get_tokenizer(str(directory), tokenizer_backend="tokbackend-auto")
    stats = tokenizer.tokbackend.stats()  # a server process serves with the final build
    assert stats["start_up"] == {"phase": "final"}, stats
    assert str(tmp_path / "fresh-cache") in stats["guard"], stats
    texts = [*TEXTS, "12345678 ſ's"]
    assert [tokenizer.encode(text) for text in texts] == [hf.encode(text) for text in texts]
    assert tokenizer.tokbackend.stats()["fast_texts"] > 0


@pytest.mark.newest_release_in_ci
def test_a_failure_building_the_fast_path_stops_start_up(plugins_loaded, tmp_path, monkeypatch):
    """Planted: the guard's derivation raises (as where a wheel lacked the package data every
    derivation reads). SGLang's tokenizer load stops with the reason rather
    than serving every call with HF behind a start-up line that named the fast path."""
    from defects import finish_without_package_data
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer

    from tokbackend.equivalence.server_models import own_pipeline_model

    directory = own_pipeline_model(tmp_path / "own-model")
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "fresh-cache"))
    finish_without_package_data(monkeypatch)
    with pytest.raises(RuntimeError, match="cannot serve .*lane failed: FileNotFoundError: planted.*Remove the flag"):
        get_tokenizer(str(directory), tokenizer_backend="tokbackend-auto")
