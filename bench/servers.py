"""Speed where users see it: requests through SGLang's and vLLM's own code on the CPU, from the
request to what the server hands its scheduler or engine core, per tokenizer configuration.

SGLang (the real `TokenizerManager` and `OpenAIServingChat`): `_tokenize_one_request` gives the
`TokenizedGenerateReqInput` (ids as `array('q')`) that goes to the scheduler. vLLM (the real
`OnlineRenderer` and `InputProcessor`): the `EngineCoreRequest`'s prompt ids. Workloads:

  request_32k   one /generate (vLLM: /v1/completions) of a ~32k-token prompt, median of distinct ones
  burst_40      40 such requests arriving together, as the server processes them by default
                (SGLang: one after another on the tokenizer manager's loop; vLLM: the renderer's pool)
  batch_40      SGLang only: 40 such prompts as one batch request through `_batch_tokenize_and_process`
                (what `--enable-tokenizer-batch-encode` runs); median of 3 batches of unseen ones
  agent_chat    a growing agent conversation (tool calls and results, ~2.5k tokens a turn, to ~32k
                tokens): each turn's chat request, render and encode included; median of the turns
  agent_text    the same conversation rendered by the chat template beforehand (as agent harnesses
                do), each turn sent as a text prompt like request_32k; median of the turns
  first_seconds the batch of 40 (vLLM: the burst of 40) right after the server loaded its
                tokenizer, before any warm-up: what a burst on a fresh process meets (the
                backends' caches and pools still cold; `accelerate()` has returned its final build)

Every workload's row names the backend that served it and whether tokbackend's build was final
(`backend`, `final`: True, False, or "mixed" when the measurement spans the swap; see
bench/served.py): the rows other than first_seconds wait for the final build before the warm-up.

SGLang's `floor` row is its manager with a tokenizer that answers every input of the workloads
with ids it computed beforehand (`memorized`, as `array('q')`, the form the manager keeps): what
the server itself costs around the tokenizer. Each cell gives its ratio to the floor.

Each configuration runs in a process of its own (SGLang's fastokens option and VLLM_USE_FASTOKENS
patch the whole process); the ids of every request are hashed and checked against plain
HuggingFace, computed in the driver. The configurations run interleaved: `--rounds` rounds (5),
each a fresh process per configuration, in an order rotated every round; a row is the median
of its rounds (every round's ms kept), and a ratio between two rows the median of their ratios
round by round. Run in the venvs .ci/run builds (CONTRIBUTING "The SGLang
and vLLM test venvs"):

  .venv-sglang/bin/python bench/servers.py sglang [--json bench/servers-sglang.json]
  .venv-vllm/bin/python bench/servers.py vllm [--json bench/servers-vllm.json]
  python bench/servers.py table bench/servers-sglang.json bench/servers-vllm.json [--chart bench/servers.png]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import served  # noqa: E402

MODEL = "qwen3"
CHARS_32K = 125_000  # ~32k tokens of the corpus's mixed text on Qwen3
SYSTEM = "You are a coding agent. Use the tools to inspect and change the repository."
# (mode name, environment): stock, the server's own fast option, tokbackend's modes
SGLANG_MODES = {
    "huggingface": {},
    "fastokens": {},
    "gigatoken": {},
    "tokbackend-auto": {},
    "raw-fastokens": {},
    "floor": {},
}
VLLM_MODES = {"hf": {}, "hf+VLLM_USE_FASTOKENS": {"VLLM_USE_FASTOKENS": "1"}, "gigatoken": {}, "tokbackend-auto": {}}
STOCK = {"sglang": "huggingface", "vllm": "hf"}
OPTION = {"sglang": "fastokens", "vllm": "hf+VLLM_USE_FASTOKENS"}
FLOOR = {"sglang": "floor"}
# what serves a mode whose tokenizer is not tokbackend's (those say it in their stats)
NOT_TOKBACKEND = {
    "huggingface": "hf",
    "hf": "hf",
    "fastokens": "fastokens (SGLang's option)",
    "hf+VLLM_USE_FASTOKENS": "fastokens (vLLM's option)",
    "raw-fastokens": "fastokens (raw)",
    "floor": "memorized ids (floor)",
}
FIRST_SECONDS_OFFSET = 300  # texts_32k offset of the first_seconds inputs
# texts_32k offsets of batch_40's batches, each of 40 unseen prompts: its row is their median (one
# batch alone moved by 20-60% between runs on 16 cores)
BATCH_OFFSETS = (200, 400, 440)


def batches_of_40() -> list[list[str]]:
    return [texts_32k(offset, 40) for offset in BATCH_OFFSETS]


def median_row(runs: list[dict]) -> dict:
    """One row of several timed runs: the median of each timing, every run's ms, all the ids."""
    row = {key: statistics.median(run[key] for run in runs) for key in runs[0] if key.endswith("ms")}
    return {**row, "runs_ms": [run["ms"] for run in runs], "ids": [digest for run in runs for digest in run["ids"]]}


# -- inputs, the same in every process ---------------------------------------------------------


def texts_32k(offset: int, count: int) -> list[str]:
    from tokbackend.equivalence.corpus import prompt_text

    return [prompt_text(1_000 + offset + index, CHARS_32K, "mixed") for index in range(count)]


def agent_conversation(turns: int) -> list[list[dict]]:
    """The message list of each turn of one growing agent conversation."""
    from tokbackend.equivalence.corpus import prompt_text

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt_text(7, 4000, "prose")}]
    requests = []
    for turn in range(turns):
        call = json.dumps({"name": "read_file", "arguments": {"path": f"src/module_{turn}.py"}})
        messages = messages + [
            {
                "role": "assistant",
                "content": f"<think>\nturn {turn}: read the next file\n</think>\n<tool_call>\n{call}\n</tool_call>",
            },
            {"role": "tool", "content": prompt_text(2_000 + turn, 10_000, "code")},
        ]
        requests.append(messages)
    return requests


def agent_texts(turns: int) -> list[str]:
    """Each turn of `agent_conversation` rendered by the model's chat template (plain HF), with
    the generation prompt: the text an agent harness sends as a prompt."""
    import tokbackend

    hf = tokbackend.load_hf(MODEL)
    conversation = agent_conversation(turns)
    return [hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) for messages in conversation]


def turns_measured(times: list[float], ids: list) -> dict:
    return {"ms": statistics.median(times) * 1e3, "last_turn_ms": times[-1] * 1e3, "ids": [digest(row) for row in ids]}


def serving_of(tokenizer, mode: str):
    """What `served.row_of` reads for a mode: tokbackend's tokenizer, or the mode's name."""
    return tokenizer if hasattr(tokenizer, "tokbackend") else NOT_TOKBACKEND.get(mode, mode)


async def timed_row(serving, measure) -> dict:
    """`await measure()` (a workload's dict), with what served it read before and after."""
    before = served.row_of(serving)
    measured = await measure()
    return {**measured, **served.spanning([before, served.row_of(serving)])}


def digest(ids) -> str:
    return hashlib.sha256(json.dumps([int(token) for token in ids]).encode()).hexdigest()[:16]


def model_dir() -> str:
    """The built-in Qwen3 tokenizer plus a tiny config (no weights: nothing runs the model)."""
    from tokbackend.equivalence.server_models import tiny_qwen3_model

    return str(tiny_qwen3_model(Path(tempfile.mkdtemp(prefix="servers-bench-")), MODEL, max_positions=131072))


# -- SGLang --------------------------------------------------------------------------------------


def sglang_plugins() -> None:
    """SGLang's `load_plugins()`, with tokbackend's plugin registered first where its entry point
    is not installed (the source tree on the path, as `bench/` runs it beside a venv)."""
    from importlib.metadata import entry_points

    from sglang.srt.plugins import load_plugins

    if not any(point.name == "tokbackend" for point in entry_points(group="sglang.srt.plugins")):
        from tokbackend.integrations.sglang import register

        register()
    load_plugins()


def sglang_manager(mode: str, directory: str):
    """SGLang's `TokenizerManager` for `--tokenizer-backend MODE`, made as its launcher makes it
    (server args resolved and published first), on the CPU. Call `sglang_plugins()` before."""
    from sglang.srt.entrypoints import engine
    from sglang.srt.managers.tokenizer_manager import TokenizerManager
    from sglang.srt.server_args import PortArgs, ServerArgs

    server_args = ServerArgs(model_path=directory, tokenizer_backend=mode, device="cpu", skip_server_warmup=True)
    if hasattr(server_args, "resolve_once"):  # 0.5.19 on
        server_args.resolve_once()
    server_args.check_server_args()
    engine.resolve_auto_parsers(server_args)
    if hasattr(engine, "publish"):  # 0.5.18 on
        engine.publish(server_args, role="tokenizer")
    return TokenizerManager(server_args, PortArgs.init_new(server_args))


async def sglang_tokenize(manager, obj, batch: int | None = None) -> list:
    """What `manager` hands its scheduler for a request object (one, or a batch of `batch`)."""
    obj.normalize_batch_and_arguments()
    items = [obj] if batch is None else [obj[index] for index in range(batch)]
    for item in items:
        manager._init_req_state(item)
    try:
        if batch is None:
            return [await manager._tokenize_one_request(obj)]
        return await manager._batch_tokenize_and_process(batch, obj)
    finally:
        manager.rid_to_state.clear()


def sglang_chat(manager, directory: str):
    """SGLang's `OpenAIServingChat` on `manager`, with the model's own chat template."""
    from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
    from sglang.srt.parser.template_manager import TemplateManager

    templates = TemplateManager()
    templates.initialize_templates(manager, model_path=directory)
    return OpenAIServingChat(manager, templates)


def sglang_chat_completion(messages: list[dict]):
    """The `ChatCompletionRequest` the chat endpoint parses from the body (made outside the
    timed part: the HTTP layer's work, the same whatever tokenizes)."""
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest

    return ChatCompletionRequest(model="m", messages=messages, max_tokens=1)


async def sglang_chat_request(chat, request):
    """What the chat endpoint hands the scheduler for a `sglang_chat_completion`: rendered, then tokenized."""
    adapted, _ = chat._convert_to_internal_request(request, None)
    (tokenized,) = await sglang_tokenize(chat.tokenizer_manager, adapted)
    return tokenized


def bench_texts(arguments) -> list[str]:
    """Every text the workloads run hand the tokenizer (the chat turns as the template renders them)."""
    import tokbackend

    hf = tokbackend.load_hf(MODEL)
    wanted = arguments.workloads
    texts = texts_32k(900, 1)  # the warm-up
    texts += texts_32k(0, arguments.repeat) if "request_32k" in wanted else []
    texts += texts_32k(100, 40) if "burst_40" in wanted else []
    texts += texts_32k(FIRST_SECONDS_OFFSET, 40) if "first_seconds" in wanted else []
    texts += [text for batch in batches_of_40() for text in batch] if "batch_40" in wanted else []
    texts += agent_texts(arguments.turns) if "agent_text" in wanted else []
    if "agent_chat" in wanted:
        texts += [hf.apply_chat_template(messages, tokenize=False) for messages in agent_conversation(arguments.turns)]
    return texts


def memorized(tokenizer, texts: list[str]):
    """A copy of `tokenizer` (HF's, as SGLang loaded it) that answers `texts` with the ids it
    computed for them here, as `array('q')` (what SGLang's manager keeps: its copy is one block),
    and any other text with a KeyError: the floor, a tokenizer that costs the server nothing."""
    from transformers import BatchEncoding

    assert tokenizer._tokenizer.num_special_tokens_to_add(False) == 0, "the floor memorizes one form of ids"
    ids = {text: array("q", tokenizer(text)["input_ids"]) for text in dict.fromkeys(texts)}

    class MemorizedIds(type(tokenizer)):
        def __call__(self, text, *args, **kwargs):
            if type(text) is str:
                return BatchEncoding({"input_ids": ids[text]})
            return BatchEncoding({"input_ids": [ids[each] for each in text]})

        def encode(self, text, *args, **kwargs):
            return ids[text]

    floor = copy.copy(tokenizer)
    floor.__class__ = MemorizedIds
    return floor


def sglang_one(mode: str, directory: str, arguments) -> dict:
    from sglang.srt.managers.io_struct import GenerateReqInput

    sglang_plugins()
    # made before the tokenizer loads: 40 unseen prompts take seconds, the final build would be in by then
    first_seconds = texts_32k(FIRST_SECONDS_OFFSET, 40) if "first_seconds" in arguments.workloads else None
    manager = sglang_manager("huggingface" if mode == "floor" else mode, directory)
    if mode == "floor":
        manager.tokenizer = memorized(manager.tokenizer, bench_texts(arguments))

    def request(text):
        return GenerateReqInput(text=text, sampling_params={"max_new_tokens": 1, "temperature": 0})

    async def tokenize(obj, batch: int | None = None):
        return await sglang_tokenize(manager, obj, batch)

    serving = serving_of(manager.tokenizer, mode)

    async def batch_of_40(batch: list[str]) -> dict:
        # the tokenizer call's share (SGLang's `_tokenize_texts`), the rest is SGLang's own work
        inner = manager._tokenize_texts
        spent = []

        async def timed_tokenize_texts(*args, **kwargs):
            begun = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - begun)

        manager._tokenize_texts = timed_tokenize_texts
        started = time.perf_counter()
        answered = await tokenize(request(batch), batch=len(batch))
        ms = (time.perf_counter() - started) * 1e3
        del manager._tokenize_texts
        return {"ms": ms, "tokenize_texts_ms": sum(spent) * 1e3, "ids": [digest(item.input_ids) for item in answered]}

    async def run() -> dict:
        out: dict = {}
        wanted = arguments.workloads
        if first_seconds is not None:  # at once: no warm-up, no wait for the final build
            out["first_seconds"] = await timed_row(serving, lambda: batch_of_40(first_seconds))
        served.steady(manager.tokenizer)  # the steady-state rows below measure the final build
        await tokenize(request(texts_32k(900, 1)[0]))  # warm-up: first long encode, thread pools
        if "request_32k" in wanted:

            async def requests() -> dict:
                times, ids = [], []
                for text in texts_32k(0, arguments.repeat):
                    started = time.perf_counter()
                    (tokenized,) = await tokenize(request(text))
                    times.append(time.perf_counter() - started)
                    ids.append(tokenized.input_ids)
                out["ids_type"] = f"{type(ids[0]).__name__}"
                return {"ms": statistics.median(times) * 1e3, "ids": [digest(row) for row in ids]}

            out["request_32k"] = await timed_row(serving, requests)
        if "burst_40" in wanted:
            burst = texts_32k(100, 40)

            async def together() -> dict:
                started = time.perf_counter()
                answered = await asyncio.gather(*(tokenize(request(text)) for text in burst))
                ms = (time.perf_counter() - started) * 1e3
                return {"ms": ms, "ids": [digest(item[0].input_ids) for item in answered]}

            out["burst_40"] = await timed_row(serving, together)
        if "batch_40" in wanted:
            batches = batches_of_40()

            async def batches_timed() -> dict:
                return median_row([await batch_of_40(batch) for batch in batches])

            out["batch_40"] = await timed_row(serving, batches_timed)
        if "agent_text" in wanted:

            async def text_turns() -> dict:
                times, ids = [], []
                for text in agent_texts(arguments.turns):
                    started = time.perf_counter()
                    (tokenized,) = await tokenize(request(text))
                    times.append(time.perf_counter() - started)
                    ids.append(tokenized.input_ids)
                return turns_measured(times, ids)

            out["agent_text"] = await timed_row(serving, text_turns)
        if "agent_chat" not in arguments.workloads:
            return out | described(manager.tokenizer, mode)
        chat = sglang_chat(manager, directory)

        async def turns() -> dict:
            times, ids = [], []
            try:
                for messages in agent_conversation(arguments.turns):
                    chat_request = sglang_chat_completion(messages)
                    started = time.perf_counter()
                    tokenized = await sglang_chat_request(chat, chat_request)
                    times.append(time.perf_counter() - started)
                    ids.append(tokenized.input_ids)
            except Exception as error:  # what the server would answer with a 500
                return {"error": f"{type(error).__name__}: {error}"}
            return turns_measured(times, ids)

        out["agent_chat"] = await timed_row(serving, turns)
        return out | described(manager.tokenizer, mode)

    return asyncio.run(run())


def described(tokenizer, mode: str) -> dict:
    """Which tokenizer object answered, what served at the end (`backend`, `final`), and
    tokbackend's counters where it was tokbackend."""
    out: dict = {"tokenizer": type(getattr(tokenizer, "_tokenizer", tokenizer)).__module__}
    out |= served.row_of(serving_of(tokenizer, mode))
    if hasattr(tokenizer, "tokbackend"):
        stats = tokenizer.tokbackend.stats()
        out["tokbackend"] = {key: stats[key] for key in ("fast_texts", "fast_texts_as_arrays", "fallbacks")}
    return out


def raw_fastokens_one(directory: str, arguments) -> dict:
    """fastokens' own batch call on the batch of 40, building lists (what a server using the
    library directly would hand on), for scale against the servers' batch paths."""
    import fastokens

    tokenizer = fastokens.Tokenizer.from_json_str((Path(directory) / "tokenizer.json").read_text())
    tokenizer.encode_batch(texts_32k(900, 2))
    runs = []
    for batch in batches_of_40():
        started = time.perf_counter()
        ids = [encoding.ids for encoding in tokenizer.encode_batch(batch)]
        runs.append({"ms": (time.perf_counter() - started) * 1e3, "ids": [digest(row) for row in ids]})
    return {"batch_40": {**median_row(runs), **served.row_of("fastokens (raw)")}, **served.row_of("fastokens (raw)")}


def reference_ids(server: str, arguments) -> dict:
    """Plain HF's ids for every input of the workloads run (chat: HF's own apply_chat_template;
    vLLM's completion kwargs truncate at max_model_len + 1, which cuts nothing here)."""
    import tokbackend

    hf = tokbackend.load_hf(MODEL)
    make = {
        "request_32k": lambda: [digest(hf.encode(text)) for text in texts_32k(0, arguments.repeat)],
        "burst_40": lambda: [digest(hf.encode(text)) for text in texts_32k(100, 40)],
        "batch_40": lambda: [digest(hf.encode(text)) for batch in batches_of_40() for text in batch],
        "first_seconds": lambda: [digest(hf.encode(text)) for text in texts_32k(FIRST_SECONDS_OFFSET, 40)],
        "agent_chat": lambda: [
            digest(hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False))
            for messages in agent_conversation(arguments.turns)
        ],
        "agent_text": lambda: [digest(hf.encode(text)) for text in agent_texts(arguments.turns)],
    }
    if server == "vllm":
        del make["batch_40"]
    return {workload: ids() for workload, ids in make.items() if workload in arguments.workloads}


# -- vLLM --------------------------------------------------------------------------------------


def vllm_one(mode: str, directory: str, arguments) -> dict:
    from vllm.config import ModelConfig, VllmConfig
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.plugins import load_general_plugins
    from vllm.renderers import renderer_from_config
    from vllm.renderers.online_renderer import OnlineRenderer
    from vllm.v1.engine.input_processor import InputProcessor

    load_general_plugins()
    # made before the tokenizer loads: 40 unseen prompts take seconds, the final build would be in by then
    first_seconds = texts_32k(FIRST_SECONDS_OFFSET, 40) if "first_seconds" in arguments.workloads else None
    model_config = ModelConfig(model=directory, tokenizer_mode=mode.split("+")[0], max_model_len=65536, dtype="float32")
    config = VllmConfig(model_config=model_config)
    renderer = renderer_from_config(config)
    processor = InputProcessor(config, renderer)
    online = OnlineRenderer(
        model_config=model_config,
        renderer=renderer,
        request_logger=None,
        chat_template=None,
        chat_template_content_format="auto",
    )

    def to_engine(index, engine_input, request):
        sampling = request.to_sampling_params(1, {})
        return processor.process_inputs(f"r{index}", engine_input, sampling, supported_tasks=("generate",))

    async def completion(index, text):
        request = CompletionRequest(model=directory, prompt=text, max_tokens=1)
        (engine_input,) = await online.render_completion(request)
        return to_engine(index, engine_input, request).prompt_token_ids

    serving = serving_of(renderer.get_tokenizer(), mode)

    async def burst_of_40(texts: list[str]) -> dict:
        started = time.perf_counter()
        answered = await asyncio.gather(*(completion(index, text) for index, text in enumerate(texts)))
        return {"ms": (time.perf_counter() - started) * 1e3, "ids": [digest(row) for row in answered]}

    async def requests() -> dict:
        times, ids = [], []
        for index, text in enumerate(texts_32k(0, arguments.repeat)):
            started = time.perf_counter()
            ids.append(await completion(index, text))
            times.append(time.perf_counter() - started)
        out["ids_type"] = type(ids[0]).__name__
        return {"ms": statistics.median(times) * 1e3, "ids": [digest(row) for row in ids]}

    async def turns() -> dict:
        times, ids = [], []
        for index, messages in enumerate(agent_conversation(arguments.turns)):
            request = ChatCompletionRequest(model=directory, messages=messages, max_tokens=1)
            started = time.perf_counter()
            _, (engine_input,) = await online.render_chat(request)
            ids.append(to_engine(index, engine_input, request).prompt_token_ids)
            times.append(time.perf_counter() - started)
        return turns_measured(times, ids)

    out: dict = {}

    async def run() -> dict:
        if first_seconds is not None:  # at once: no warm-up, no wait for the final build
            out["first_seconds"] = await timed_row(serving, lambda: burst_of_40(first_seconds))
        served.steady(renderer.get_tokenizer())  # the steady-state rows below measure the final build
        await completion(0, texts_32k(900, 1)[0])
        out["request_32k"] = await timed_row(serving, requests)
        burst = texts_32k(100, 40)
        out["burst_40"] = await timed_row(serving, lambda: burst_of_40(burst))
        out["agent_chat"] = await timed_row(serving, turns)

        async def text_turns() -> dict:
            times, ids = [], []
            for index, text in enumerate(agent_texts(arguments.turns)):
                started = time.perf_counter()
                ids.append(await completion(index, text))
                times.append(time.perf_counter() - started)
            return turns_measured(times, ids)

        if "agent_text" in arguments.workloads:
            out["agent_text"] = await timed_row(serving, text_turns)
        out.update(described(renderer.get_tokenizer(), mode))
        renderer.shutdown()
        return out

    return asyncio.run(run())


# -- driver ------------------------------------------------------------------------------------


def run_one(server: str, mode: str, directory: str, arguments, reference: dict) -> dict:
    """One configuration in a fresh process: its workloads, each ids compared with HF's."""
    with tempfile.NamedTemporaryFile(suffix=".json") as output:
        command = [sys.executable, __file__, "one", server, mode, directory, output.name]
        command += [
            "--repeat",
            str(arguments.repeat),
            "--turns",
            str(arguments.turns),
            "--workloads",
            *arguments.workloads,
        ]
        environment = (SGLANG_MODES if server == "sglang" else VLLM_MODES)[mode]
        completed = subprocess.run(command, env={**os.environ, **environment}, check=False, timeout=3000)
        if completed.returncode != 0:
            return {"error": f"exit {completed.returncode}"}
        measured = json.loads(Path(output.name).read_text())
    for workload, expected in reference.items():
        if "ids" in measured.get(workload, {}):
            measured[workload]["ids_equal_hf"] = measured[workload].pop("ids") == expected
    return measured


def over_rounds(rounds: list[dict]) -> dict:
    """One configuration's rounds as one: each workload's median ms (and every round's), its ids
    equal to HF's in every round, what served it in every round (`served.spanning`)."""
    failed = [measured["error"] for measured in rounds if "error" in measured]
    if failed:
        return {"error": failed[0], "rounds_failed": len(failed)}
    out = {key: value for key, value in rounds[-1].items() if key not in WORKLOADS}
    out |= served.spanning(rounds)
    for workload in WORKLOADS:
        measured = [each[workload] for each in rounds if workload in each]
        if not measured:
            continue
        errors = [each["error"] for each in measured if "error" in each]
        if errors:
            out[workload] = {"error": errors[0]}
            continue
        row = {key: statistics.median(each[key] for each in measured) for key in measured[0] if key.endswith("ms")}
        row["rounds_ms"] = [each["ms"] for each in measured]
        if all("ids_equal_hf" in each for each in measured):
            row["ids_equal_hf"] = all(each["ids_equal_hf"] for each in measured)
        out[workload] = row | served.spanning(measured)
    return out


def drive(server: str, arguments) -> None:
    modes = [
        mode
        for mode in (SGLANG_MODES if server == "sglang" else VLLM_MODES)
        if not arguments.modes or mode in arguments.modes
    ]
    reference = reference_ids(server, arguments)
    directory = model_dir()
    result = {"server": server, "version": None, "cpu_count": os.cpu_count(), "rounds": arguments.rounds, "modes": {}}
    rounds: dict[str, list[dict]] = {mode: [] for mode in modes}
    for round_index in range(arguments.rounds):
        # interleaved: each round runs every configuration, starting one further along
        for mode in modes[round_index % len(modes) :] + modes[: round_index % len(modes)]:
            rounds[mode].append(run_one(server, mode, directory, arguments, reference))
            print(round_index, mode, json.dumps(rounds[mode][-1], default=str), flush=True)
    result["modes"] = {mode: over_rounds(rounds[mode]) for mode in modes}
    result["version"] = __import__(server).__version__
    shutil.rmtree(directory, ignore_errors=True)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(result, indent=1) + "\n")
    print(table([result]))


def one(server: str, mode: str, directory: str, output: str, arguments) -> None:
    if mode == "raw-fastokens":
        measured = raw_fastokens_one(directory, arguments)
    else:
        measured = (sglang_one if server == "sglang" else vllm_one)(mode, directory, arguments)
    Path(output).write_text(json.dumps(measured))
    sys.stdout.flush()
    os._exit(0)  # SGLang's manager tasks and ZMQ context, vLLM's pools: nothing to wait for


WORKLOADS = ("request_32k", "burst_40", "batch_40", "agent_chat", "agent_text", "first_seconds")


def ratio(row: dict, other: dict) -> float:
    """`row`'s time over `other`'s: the median of their ratios round by round where both hold the
    same rounds (each round ran every configuration one after the other), else of their medians."""
    rounds, others = row.get("rounds_ms"), other.get("rounds_ms")
    if rounds and others and len(rounds) == len(others):
        return statistics.median(mine / theirs for mine, theirs in zip(rounds, others))
    return row["ms"] / other["ms"]


def table(results: list[dict]) -> str:
    """Markdown: ms per workload and mode, each with its ratio to stock and to the server's own
    fast option, and its time over the floor's (SGLang), all measured in the same run; and
    whether every id equals plain HuggingFace's."""
    lines = []
    for result in results:
        server = result["server"]
        modes = result["modes"]
        floor_name = FLOOR.get(server)
        over_floor = f"; x the {floor_name}'s time" if floor_name in modes else ""
        rounds = f", medians of {result['rounds']} interleaved rounds" if result.get("rounds") else ""
        lines.append(
            f"\n{server} {result['version']}, {result['cpu_count']} cores{rounds}: "
            f"ms (x faster than stock / than {OPTION[server]}{over_floor})\n"
        )
        lines.append("| workload | " + " | ".join(modes) + " |")
        lines.append("|---|" + "---:|" * len(modes))
        for workload in WORKLOADS:
            if not any("ms" in measured.get(workload, {}) for measured in modes.values()):
                continue
            cells = []
            stock, option = (modes.get(name, {}).get(workload, {}) for name in (STOCK[server], OPTION[server]))
            floor = modes.get(floor_name, {}).get(workload, {}) if floor_name else {}
            for measured in modes.values():
                outcome = measured.get(workload, {"error": measured["error"]} if "error" in measured else None)
                if outcome is None:
                    cells.append("-")
                    continue
                if "error" in outcome:
                    cells.append(f"fails: {outcome['error'].split(':')[0]}")
                    continue
                ms = outcome["ms"]
                ratios = " / ".join(
                    f"{ratio(other, outcome):.2f}x" if "ms" in other else "-" for other in (stock, option)
                )
                if "ms" in floor:
                    ratios += f"; {ratio(outcome, floor):.2f}x floor"
                exact = "" if outcome.get("ids_equal_hf") else " **ids differ**"
                # the backend where it is not the mode's steady one (a tree before 0.2.0 could swap mid-row)
                steady = served.label(measured) if "backend" in measured else None
                where = (
                    f" [{served.label(outcome)}]" if "backend" in outcome and served.label(outcome) != steady else ""
                )
                cells.append(f"{ms:.1f} ({ratios}){exact}{where}")
            lines.append(f"| {workload} | " + " | ".join(cells) + " |")
        lines.append(
            "| served by (steady) | " + " | ".join(served.label(measured) for measured in modes.values()) + " |"
        )
    return "\n".join(lines)


def chart(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for axis, result in zip(axes[0], results):
        server, modes = result["server"], result["modes"]
        workloads = [w for w in WORKLOADS if "ms" in modes[STOCK[server]].get(w, {})]
        width = 0.8 / len(modes)
        for offset, (mode, measured) in enumerate(modes.items()):
            speedups = [
                modes[STOCK[server]][w]["ms"] / measured[w]["ms"] if "ms" in measured.get(w, {}) else 0
                for w in workloads
            ]
            axis.bar([i + offset * width for i in range(len(workloads))], speedups, width, label=mode)
        axis.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))], workloads)
        axis.set_yscale("log")
        axis.set_ylabel("x faster than stock (same run)")
        axis.set_title(f"{server} {result['version']}")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for server in ("sglang", "vllm"):
        run_parser = sub.add_parser(server)
        run_parser.add_argument("--modes", nargs="*")
        run_parser.add_argument("--json", default=str(Path(__file__).resolve().parent / f"servers-{server}.json"))
        run_parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; a row is their median")
    one_parser = sub.add_parser("one")
    one_parser.add_argument("server")
    one_parser.add_argument("mode")
    one_parser.add_argument("directory")
    one_parser.add_argument("output")
    for each in (*(sub.choices[s] for s in ("sglang", "vllm")), one_parser):
        each.add_argument("--repeat", type=int, default=5)
        each.add_argument("--turns", type=int, default=12)
        each.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    table_parser = sub.add_parser("table")
    table_parser.add_argument("results", nargs="+")
    table_parser.add_argument("--chart")
    arguments = parser.parse_args()
    if arguments.command == "one":
        one(arguments.server, arguments.mode, arguments.directory, arguments.output, arguments)
    elif arguments.command == "table":
        results = [json.loads(Path(path).read_text()) for path in arguments.results]
        print(table(results))
        if arguments.chart:
            chart(results, arguments.chart)
    else:
        drive(arguments.command, arguments)


if __name__ == "__main__":
    main()
