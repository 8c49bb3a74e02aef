"""Every backend, raw and through tokbackend, in one run: one 32k-token prompt, a burst of 40,
thread scaling of the burst, and event-loop lag under a long stream of distinct prompts.

Usage:
  python bench/backends.py speed [--prompts 12]        # the table (ratios vs the best raw call)
  python bench/backends.py scaling [--threads 1 2 4 8 16] [--merge bench/backends-scaling.json]
  python bench/backends.py stalls [--prompts 3000]     # event-loop lag p50/p99/max per backend
  python bench/backends.py agents [--quick] [--agents 4] [--turns 10] [--guarded]  # agent conversations, first seconds
  python bench/backends.py cache-cost [--prompts 80]   # the segment cache on prompts that never repeat
  python -c "from bench.backends import chart; ..."     # bench/backends.png from the JSON files
Prints Markdown for bench/RESULTS.md and writes bench/backends-<mode>.json.
Prompts are unseen: a fresh seed per prompt, ~130k characters (~32k Qwen3.6 tokens).
Every row names the backend that served it and whether tokbackend's build was final
(`bench/served.py`): steady-state rows wait for the final build; cold scaling and the agents'
"first seconds" row measure a fresh process right after `accelerate()`, and say what served.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import dataclasses
import datetime
import functools
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import served  # noqa: E402

MODEL = "qwen3.6"
PROMPT_CHARS = 130_000
BURST = 40
_seed = [20_000_000]


def _generated(seed: int) -> str:
    """prompt_text(seed), kept on disk: generating one costs ~0.1-0.2 s, and every child of a
    scaling run needs the same 86 of them."""
    from tokbackend.equivalence.corpus import prompt_text

    path = Path(os.environ.get("TMPDIR", "/tmp")) / "tokbackend-bench-prompts" / f"{seed}-{PROMPT_CHARS}.txt"
    if path.exists():
        return path.read_bytes().decode("utf-8", "surrogatepass")
    text = prompt_text(seed, PROMPT_CHARS)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    partial.write_bytes(text.encode("utf-8", "surrogatepass"))  # bytes: no newline translation
    partial.replace(path)
    return text


def unseen(count: int) -> list[str]:
    texts = [_generated(_seed[0] + index) for index in range(count)]
    _seed[0] += count
    return texts


# The floor of any segment cache that encodes new text with fastokens: raw fastokens on only the
# pieces of each request that no earlier request had (the system prompt is in the first burst).
NEW_TEXT_ONLY = "raw fastokens, new pieces only (floor)"


@dataclasses.dataclass(frozen=True)
class Encoder:
    """One row of a table: what runs, declared as data (the label only names it).

    kind: "hf" (HuggingFace's own tokenizer), "raw" (a library called directly, no tokbackend),
    "tokbackend" (`tokbackend.accelerate` with `backend`), or "floor" (see `NEW_TEXT_ONLY`).
    """

    label: str
    kind: str
    library: str | None = None  # raw: "gigatoken" or "fastokens"
    form: str = "ids"  # raw fastokens, one text: "ids" (Encoding.ids) or "flat" (encode_batch_flat)
    library_cache: bool = False  # raw fastokens with its own segment cache
    backend: str | None = None  # tokbackend: the backend name
    segment_cache: bool = True  # tokbackend: the segment cache (on by default)
    arrays: bool = False  # tokbackend: one text's ids asked for as `array('q')`, as SGLang asks for a text prompt's


def _ours(backend: str, segment_cache: bool) -> Encoder:
    return Encoder(
        f"tokbackend {backend}, segment cache {'on' if segment_cache else 'off'}",
        "tokbackend",
        backend=backend,
        segment_cache=segment_cache,
    )


ENCODERS = {
    encoder.label: encoder
    for encoder in (
        Encoder("HF", "hf"),
        Encoder("raw gigatoken", "raw", library="gigatoken"),
        Encoder("raw fastokens (.ids)", "raw", library="fastokens"),
        Encoder("raw fastokens (flat)", "raw", library="fastokens", form="flat"),
        Encoder("fastokens + its segment cache", "raw", library="fastokens", library_cache=True),
        _ours("gigatoken", True),
        _ours("fastokens", False),
        _ours("fastokens", True),
        _ours("auto", False),
        _ours("auto", True),
        Encoder("tokbackend auto, segment cache on, arrays", "tokbackend", backend="auto", arrays=True),
        Encoder(NEW_TEXT_ONLY, "floor"),
    )
}
SPEED_ENCODERS = (
    "HF",
    "raw gigatoken",
    "raw fastokens (.ids)",
    "raw fastokens (flat)",
    "tokbackend gigatoken, segment cache on",
    "tokbackend fastokens, segment cache off",
    "tokbackend fastokens, segment cache on",
    "tokbackend auto, segment cache on",
)


Built = tuple[Callable[[str], list[int]], Callable[[list[str]], list[list[int]]], object]


def build_encoder(encoder: Encoder, hf, tokenizer_json: str, steady: bool = True) -> Built:
    """(one-text encode, many-text encode, what serves them) of `encoder`, the encodes returning
    Python lists of ids; what serves them is for `served.row_of`. steady: a tokbackend encoder
    waits for its final build (False: the first seconds after `accelerate()`, as they come)."""
    import tokbackend

    if encoder.kind == "hf":
        return hf.encode, lambda texts: hf(texts)["input_ids"], hf
    if encoder.kind == "tokbackend":
        accelerated = tokbackend.accelerate(
            hf, encoder.backend, segment_cache_mib=64 if encoder.segment_cache else None
        )
        if steady:
            served.steady(accelerated)
        if encoder.arrays:

            def as_array(text: str) -> object:
                with tokbackend.ids_as_arrays():
                    return accelerated.encode(text)

            def as_arrays(texts: list[str]) -> object:
                with tokbackend.ids_as_arrays():
                    return accelerated(texts)["input_ids"]

            return as_array, as_arrays, accelerated
        return accelerated.encode, lambda texts: accelerated(texts)["input_ids"], accelerated
    if encoder.kind == "raw" and encoder.library == "gigatoken":
        import gigatoken

        giga = gigatoken.Tokenizer.from_json(tokenizer_json).backend
        return lambda text: giga.encode_batch_list([text], parallel=False)[0], giga.encode_batch_list, "gigatoken (raw)"
    if encoder.kind == "raw" and encoder.library == "fastokens":
        import fastokens

        fast = fastokens.Tokenizer.from_json_str(tokenizer_json)
        name = "fastokens (raw)"
        if encoder.library_cache:
            fast.enable_segment_cache(256 << 20)
            name = "fastokens (raw, its segment cache)"
        if encoder.form == "ids":
            return lambda text: fast.encode(text).ids, lambda texts: [e.ids for e in fast.encode_batch(texts)], name

        def flat(texts):
            ids, offsets = fast.encode_batch_flat(texts)
            ids, offsets = array.array("I", ids), array.array("Q", offsets)
            return [ids[offsets[index] : offsets[index + 1]].tolist() for index in range(len(texts))]

        return lambda text: flat([text])[0], flat, name
    raise ValueError(f"{encoder.label}: no builder for kind {encoder.kind!r}")


def competitor(label: str, steady: bool = True) -> Built:
    """`build_encoder` for the row labelled `label`, on the bench's model. Each is measured in a
    process of its own: libraries with thread pools of their own would otherwise compete for the
    cores while another encoder is timed."""
    import tokbackend

    hf = tokbackend.load_hf(MODEL)
    return build_encoder(ENCODERS[label], hf, hf.backend_tokenizer.to_str(), steady)


def _child(mode: str, name: str, prompts: int) -> None:
    """Runs in a child process: times `name`, prints one RESULT line (with what served it)."""
    rows = []
    if mode != "cold":  # cold builds a fresh competitor for each burst below
        one, many, serving = competitor(name)
        _seed[0] = 19_000_000
        many(unseen(4))  # warm, on text that is not measured (caches of a backend must not see it again)
        rows.append(served.row_of(serving))
    _seed[0] = 20_000_000
    single = []
    for text in unseen(min(3, prompts) if name == "HF" else prompts):
        started = time.perf_counter()
        one(text)
        single.append(time.perf_counter() - started)
    bursts = []
    for _ in range(3 if mode == "speed" else 2):
        texts = unseen(BURST)
        if mode == "cold":  # a freshly started replica: nothing of the backend's caches is warm
            if rows:  # the last replica's build finishing on its thread must not run beside this one
                served.steady(serving)
            one, many, serving = competitor(name, steady=False)
            many(["warm the thread pools"] * BURST)
            rows.append(served.row_of(serving))  # a call is served by one build: the one serving now
        started = time.perf_counter()
        many(texts)
        bursts.append(time.perf_counter() - started)
    if mode != "cold":
        rows.append(served.row_of(serving))
    summary = statistics.median if mode == "speed" else min
    result = {"single_ms": statistics.median(single or [0.0]) * 1e3, "burst_ms": summary(bursts) * 1e3}
    print("RESULT " + json.dumps({**result, **served.spanning(rows)}))


def _in_child(
    mode: str,
    name: str,
    prompts: int,
    environment: dict | None = None,
    cores: int | None = None,
    options: tuple[str, ...] = (),
) -> dict:
    """Runs `_child` in a fresh process, pinned to the first `cores` cores when given (rayon and
    fastokens size their pools from the cores a process may use); `options` go to its command line."""
    completed = subprocess.run(
        [
            sys.executable,
            __file__,
            "child",
            "--child-mode",
            mode,
            "--competitor",
            name,
            "--prompts",
            str(prompts),
            *options,
        ],
        env={**os.environ, **(environment or {})},
        capture_output=True,
        text=True,
        preexec_fn=None if cores is None else lambda: os.sched_setaffinity(0, range(cores)),
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"{name}: {completed.stderr[-2000:]}")
    return json.loads(lines[0].removeprefix("RESULT "))


def speed(prompts: int) -> dict:
    table = {name: _in_child("speed", name, prompts) for name in SPEED_ENCODERS}
    best_single = min(row["single_ms"] for name, row in table.items() if name.startswith("raw"))
    best_burst = min(row["burst_ms"] for name, row in table.items() if name.startswith("raw"))
    for row in table.values():
        row["single_vs_best_raw"] = row["single_ms"] / best_single
        row["burst_vs_best_raw"] = row["burst_ms"] / best_burst
    lines = [
        "| encoder (each in its own process) | served by | one 32k prompt ms | vs best raw | burst of 40 ms | "
        "vs best raw |",
        "|---|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {served.label(row)} | {row['single_ms']:.2f} | {row['single_vs_best_raw']:.2f}x | "
            f"{row['burst_ms']:.1f} | {row['burst_vs_best_raw']:.2f}x |"
            for name, row in table.items()
        ),
    ]
    return {"table": table, "markdown": "\n".join(lines)}


SCALING_ENCODERS = (
    "raw gigatoken",
    "raw fastokens (.ids)",
    "tokbackend fastokens, segment cache on",
    "tokbackend auto, segment cache on",
)


def scaling(threads: list[int], earlier: Path | None = None, cold: bool = False) -> dict:
    """The burst with each library's thread pools limited to 1..16 threads (one process each).
    `earlier`: the JSON of a run on the same host with other thread counts, merged in (a device
    call is limited in time, so the counts can be measured in several calls)."""
    rows: dict[int, dict[str, dict]] = {}
    if earlier is not None:
        for count, row in json.loads(earlier.read_text())["rows"].items():
            missing = [name for name in SCALING_ENCODERS if name not in row]
            if missing:  # measured by an older bench, under other names: not comparable
                print(f"--merge: {count} threads left out of {earlier}: it has no {', '.join(missing)}", flush=True)
                continue
            # files from before rows said what served them hold the milliseconds alone
            rows[int(count)] = {
                name: cell if isinstance(cell, dict) else {"burst_ms": cell} for name, cell in row.items()
            }
    for count in threads:
        # Environment variables alone do not limit fastokens (measured: 76 ms at "1 thread", 39 at 8),
        # so each child is pinned to `count` cores as well.
        limits = {"RAYON_NUM_THREADS": str(count), "FASTOKENS_BPE_THREADS": str(count)}
        mode = "cold" if cold else "scaling"
        measured = {name: _in_child(mode, name, 0, limits, cores=count) for name in SCALING_ENCODERS}
        rows[count] = {name: {key: row[key] for key in ("burst_ms", *served.FIELDS)} for name, row in measured.items()}
        print(f"{count} threads: {json.dumps(rows[count])}", flush=True)
    threads = sorted(rows)
    lines = [
        "| burst of 40, ms (served by) | "
        + " | ".join(f"{count} threads" for count in threads)
        + f" | {threads[0]}->{threads[-1]} |",
        "|---|" + "---:|" * (len(threads) + 1),
    ]
    for name in SCALING_ENCODERS:
        cells = [f"{rows[count][name]['burst_ms']:.0f} ({served.label(rows[count][name])})" for count in threads]
        speedup = rows[threads[0]][name]["burst_ms"] / rows[threads[-1]][name]["burst_ms"]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {speedup:.1f}x |")
    return {"rows": rows, "markdown": "\n".join(lines)}


def _prompt(index: int) -> str:
    from tokbackend.equivalence.corpus import prompt_text

    return prompt_text(30_000_000 + index, PROMPT_CHARS)


def _lags_while_encoding(accelerated, texts: list[str], workers: int) -> list[float]:
    """Sorted wake-up delays of a 5 ms asyncio ticker while `workers` threads encode `texts`."""
    import concurrent.futures

    stream = iter(texts)
    lock = threading.Lock()
    done = threading.Event()
    lags: list[float] = []

    def worker():
        while True:
            with lock:
                text = next(stream, None)
            if text is None:
                return
            accelerated.encode(text)

    async def ticker():
        while not done.is_set():
            wanted = time.perf_counter() + 0.005
            await asyncio.sleep(0.005)
            lags.append(max(0.0, time.perf_counter() - wanted))

    async def run():
        loop = asyncio.get_running_loop()
        tick = asyncio.create_task(ticker())
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            await asyncio.gather(*(loop.run_in_executor(pool, worker) for _ in range(workers)))
        done.set()
        await tick

    asyncio.run(run())
    return sorted(lags)


CACHE_MODES = ("off", "on", "always consulted")


def _chat(text: str) -> str:
    return (
        f"<|im_start|>system\n{text[:4000]}<|im_end|>\n"
        f"<|im_start|>user\n{text[4000:]}<|im_end|>\n<|im_start|>assistant\n"
    )


def _cache_cost_shapes(prompts: int) -> dict[str, tuple[Callable, list]]:
    """shape -> (call(tokenizer, input), inputs): the same unseen prompts in every process."""
    _seed[0] = 40_000_000
    single = unseen(prompts)
    bursts = [[_chat(text) for text in unseen(BURST)] for _ in range(max(6, prompts // 8))]
    return {
        "one plain prompt": (lambda tokenizer, text: tokenizer.encode(text), single),
        "one ChatML request": (lambda tokenizer, text: tokenizer.encode(text), [_chat(text) for text in single]),
        "burst of 40 ChatML requests": (lambda tokenizer, texts: tokenizer(texts)["input_ids"], bursts),
    }


def _cache_cost_child(mode: str, prompts: int) -> dict:
    """Runs in a child process: per shape a fresh tokenizer (an empty cache of its own), its
    cache as `mode` says, every input of the shape once (a backend must meet each text fresh),
    each timed."""
    import tokbackend

    hf = tokbackend.load_hf(MODEL)
    cache = None if mode == "off" else 64
    result = {}
    for seed, (shape, (call, inputs)) in enumerate(_cache_cost_shapes(prompts).items()):
        tokenizer = tokbackend.accelerate(
            hf, "fastokens", segment_cache_mib=cache, segment_cache_steps_aside=mode == "on"
        )
        served.steady(tokenizer)
        _seed[0] = 39_000_000 + seed
        tokenizer.encode(_chat(unseen(1)[0]))  # warm, on text that is not measured
        gc.collect()
        times = []
        before = served.row_of(tokenizer)
        for item in inputs:
            started = time.perf_counter()
            call(tokenizer, item)
            times.append(time.perf_counter() - started)
        segments = tokenizer.tokbackend.build.segments
        bypassed = 0 if segments is None else segments.cache.bypassed
        texts = len(inputs) * (BURST if isinstance(inputs[0], list) else 1)
        row = served.spanning([before, served.row_of(tokenizer)])
        result[shape] = {"times": times, "texts": texts, "through_cache": texts - bypassed, **row}
    return result


def cache_cost(prompts: int) -> dict:
    """What the segment cache costs on prompts that never repeat, per shape: fastokens with the
    cache off, on as by default (it steps aside once the stream shows nothing to reuse), and on
    with stepping aside off ("always consulted").

    Each mode runs in a process of its own, twice (in the order off, on, always, then reversed),
    over the same unseen inputs; an input's time is the lower of its two runs. Each text must
    reach a backend fresh: timing the modes one after another on one backend let whichever went
    second find the text in fastokens' caches (identical code paths then differed by 5-8% per
    text). Reported: medians, and the median over inputs of each input's ratio to its time with
    the cache off (the inputs' own costs differ by 3x, so unpaired medians move with the few
    inputs around the middle)."""
    runs: dict[str, list[dict]] = {mode: [] for mode in CACHE_MODES}
    for order in (CACHE_MODES, CACHE_MODES[::-1]):
        for mode in order:
            runs[mode].append(_in_child("cache-cost", mode, prompts))
    rows = {}
    for shape in runs["off"][0]:
        best = {mode: [min(pair) for pair in zip(*(run[shape]["times"] for run in runs[mode]))] for mode in CACHE_MODES}
        row = {"inputs": len(best["off"]), "texts": runs["on"][0][shape]["texts"]}
        row.update(served.spanning(run[shape] for mode in CACHE_MODES for run in runs[mode]))
        row["through_cache"] = runs["on"][0][shape]["through_cache"]
        for mode in CACHE_MODES:
            row[f"{mode}_ms"] = statistics.median(best[mode]) * 1e3
        for mode in CACHE_MODES[1:]:
            row[f"{mode} / off"] = statistics.median(a / b for a, b in zip(best[mode], best["off"]))
            row[f"{mode} / off, means"] = statistics.fmean(best[mode]) / statistics.fmean(best["off"])
        rows[shape] = row
    lines = [
        "| unrelated prompts (no repeats) | served by | cache off ms | on ms | on / off (median per input; means) "
        "| always consulted / off (median per input; means) | texts through the cache when on |",
        "|---|---|---:|---:|---:|---:|---:|",
        *(
            f"| {shape} | {served.label(row)} | {row['off_ms']:.2f} | {row['on_ms']:.2f} "
            f"| {row['on / off']:.3f}; {row['on / off, means']:.3f} "
            f"| {row['always consulted / off']:.3f}; {row['always consulted / off, means']:.3f} "
            f"| {row['through_cache']} of {row['texts']} |"
            for shape, row in rows.items()
        ),
    ]
    return {"table": rows, "markdown": "\n".join(lines)}


def stalls(prompts: int, workers: int = 4) -> dict:
    """Event-loop lag while a thread pool encodes `prompts` distinct prompts through tokbackend:
    a loop that wants to wake every 5 ms records how late it wakes (the host's other Python work
    waits that long)."""
    import multiprocessing

    import tokbackend

    # Prompts are made beforehand, in other processes, so that the threads only encode.
    with multiprocessing.get_context("spawn").Pool(min(16, os.cpu_count() or 1)) as pool:
        texts = pool.map(_prompt, range(prompts), chunksize=16)
    hf = tokbackend.load_hf(MODEL)
    results = {}
    for backend, budget in (("gigatoken", 256), ("gigatoken", 32), ("fastokens", None)):
        accelerated = served.steady(tokbackend.accelerate(hf, backend, cache_budget_mib=budget, segment_cache_mib=None))
        started = time.perf_counter()
        lags, row = served.during(accelerated, functools.partial(_lags_while_encoding, accelerated, texts, workers))
        stats = accelerated.tokbackend.stats()
        results[backend if budget in (None, 256) else f"{backend}, cache budget {budget} MiB"] = {
            **row,
            "seconds": time.perf_counter() - started,
            "lag_p50_ms": lags[len(lags) // 2] * 1e3,
            "lag_p99_ms": lags[int(len(lags) * 0.99)] * 1e3,
            "lag_max_ms": lags[-1] * 1e3,
            "cache_renewals": stats.get("cache_renewals", 0),
            "fast_texts": stats["fast_texts"],
        }
    lines = [
        f"| backend ({prompts} distinct ~32k-token prompts, {workers} threads) | served by | lag p50 ms | p99 "
        f"ms | max ms "
        "| renewals | s |",
        "|---|---|---:|---:|---:|---:|---:|",
        *(
            f"| tokbackend {name} | {served.label(row)} | {row['lag_p50_ms']:.2f} | {row['lag_p99_ms']:.2f} "
            f"| {row['lag_max_ms']:.0f} | "
            f"{row['cache_renewals']} | {row['seconds']:.0f} |"
            for name, row in results.items()
        ),
    ]
    return {"results": results, "markdown": "\n".join(lines)}


SYSTEM_CHARS = 16_000  # ~4k tokens of instructions and tool schemas, shared by every agent
MESSAGE_CHARS = 4_500  # ~1.1k tokens per message; 10 turns of two messages reach ~26k tokens
AGENTS, TURNS = 4, 10


def conversation_turns(agent: int, turns: int, guarded: list[int] = ()) -> list[str]:
    """The ChatML text an agent sends at each turn: the shared system prompt, then every earlier
    user and assistant message, then the new user message. `guarded`: code points a Unicode
    guard holds; the agent's first user message quotes one of them (a name, a symbol pasted from
    a tool's output), so every later request of the conversation holds it too."""
    from tokbackend.equivalence.corpus import prompt_text

    system = prompt_text(1, SYSTEM_CHARS, "code")
    text = f"<|im_start|>system\n{system}<|im_end|>\n"
    sent = []
    for turn in range(turns):
        user = prompt_text(50_000_000 + agent * 1000 + 2 * turn, MESSAGE_CHARS)
        if guarded and turn == 0:
            user = f"about {chr(guarded[agent % len(guarded)])}: {user}"
        text += f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        sent.append(text)
        answer = prompt_text(50_000_000 + agent * 1000 + 2 * turn + 1, MESSAGE_CHARS, "code")
        text += f"<think>\nplan {turn}\n</think>\n\n<tool_call>\n{answer}\n</tool_call><|im_end|>\n"
    return sent


def _new_text_only(tokenizer_json: str, first_turns: list[str], requests: list[str]) -> Callable:
    from tokbackend._segments import AddedTokenSplitter, text_of
    from tokbackend.backends._fastokens import FastokensBackend, FastokensOptions

    splitter = AddedTokenSplitter.for_tokenizer_json(tokenizer_json)
    seen: set[str] = set()

    def new_pieces(texts: list[str]) -> list[str]:
        pieces = [text_of(part) for text in texts for part in splitter.split(text) if type(part) is not int]
        fresh = [piece for piece in dict.fromkeys(pieces) if piece not in seen]
        seen.update(fresh)
        return fresh

    burst_pieces = new_pieces(first_turns)
    request_pieces = iter([new_pieces([text]) for text in requests])

    def build():
        # the backend class tokbackend encodes missed pieces with, without tokbackend around it
        # (warmed: it then serves single texts with the form it measured faster, as tokbackend's)
        backend = FastokensBackend(tokenizer_json, FastokensOptions())

        def one(text: str) -> list[list[int]]:
            return [backend.encode(piece) for piece in next(request_pieces)]

        return one, lambda texts: backend.encode_batch(burst_pieces)

    return build


AGENT_ENCODERS = (
    "HF",
    "raw gigatoken",
    "raw fastokens (.ids)",
    "fastokens + its segment cache",
    "tokbackend fastokens, segment cache off",
    "tokbackend gigatoken, segment cache on",
    "tokbackend fastokens, segment cache on",
    "tokbackend auto, segment cache on",
    "tokbackend auto, segment cache on, arrays",
    NEW_TEXT_ONLY,
)
# The row a fresh process sees: auto's encoder timed at once after accelerate(), before the
# backends' warm-ups have finished (the other tokbackend rows wait for them).
FIRST_SECONDS = "tokbackend auto, first seconds after accelerate()"
FIRST_SECONDS_OF = "tokbackend auto, segment cache on"
QUICK_AGENT_ENCODERS = ("HF", "raw fastokens (.ids)", "tokbackend auto, segment cache on")


def _agent_workload(conversations: int, turns: int, guarded: list[int] = ()) -> tuple[list[str], list[str]]:
    """(each agent's turns in order, agents interleaved; the first turns of a burst of agents)."""
    requests = [
        text
        for turn in zip(*(conversation_turns(agent, turns, guarded) for agent in range(conversations)))
        for text in turn
    ]
    return requests, [conversation_turns(100 + agent, 1, guarded)[0] for agent in range(BURST)]


def guarded_code_points(tokenizer_json: str, count: int = 16) -> list[int]:
    """`count` code points spread over gigatoken's Unicode guard for this tokenizer (the guard
    of the larger guard): its shipped or cached record, as accelerate() finds it."""
    from tokbackend._cache_dir import cache_dir
    from tokbackend._guard import guard_versions
    from tokbackend._guard.records import find_record, record_key
    from tokbackend._guard.scan import from_ranges
    from tokbackend.equivalence.conversations import guarded_sample

    record, _ = find_record(record_key(tokenizer_json, "gigatoken"), cache_dir(), guard_versions(("gigatoken",)))
    if record is None:
        raise RuntimeError("--guarded: no gigatoken guard record for this model with the installed versions")
    return guarded_sample(from_ranges(record["code_points"]), count)[:count]


def _agents_row(name: str, conversations: int, turns: int, guarded: bool = False) -> dict:
    """Runs in a child process: encoder `name`, fresh (nothing cached), on the first burst and
    then every request, each timed; ids compared with HF's. `FIRST_SECONDS` times auto's encoder
    from the moment accelerate() returns (the inputs and HF's ids are made before it); every
    other tokbackend row once its final build serves. What served each call is read before it
    (a call is served by one build): the row says which backends served, and `final` is
    "mixed" where the swap came in the middle, with the medians of the requests on either side."""
    import tokbackend

    hf = tokbackend.load_hf(MODEL)
    tokenizer_json = hf.backend_tokenizer.to_str()
    requests, first_turns = _agent_workload(
        conversations, turns, guarded_code_points(tokenizer_json) if guarded else ()
    )

    encoder = ENCODERS[FIRST_SECONDS_OF if name == FIRST_SECONDS else name]
    if encoder.kind == "floor":
        build = _new_text_only(tokenizer_json, first_turns, requests)
    else:
        build = functools.partial(build_encoder, encoder, hf, tokenizer_json, steady=name != FIRST_SECONDS)
    expected = [hf.encode(text) for text in requests]
    expected_burst = hf(first_turns)["input_ids"]
    gc.collect()
    one, many, serving = build() if encoder.kind != "floor" else (*build(), "fastokens (raw, new pieces only)")
    ready = time.perf_counter()
    rows = [served.row_of(serving)]
    started = time.perf_counter()
    burst = many(first_turns)
    burst_ms = (time.perf_counter() - started) * 1e3
    times, exact = [], [list(ids) for ids in burst] == expected_burst  # an array row's too
    by_final: dict[bool, list[float]] = {True: [], False: []}
    for text, ids in zip(requests, expected):
        rows.append(served.row_of(serving))
        started = time.perf_counter()
        result = one(text)
        times.append(time.perf_counter() - started)
        by_final[rows[-1]["final"]].append(times[-1])
        exact = exact and list(result) == ids  # an array row's too
    window_s = time.perf_counter() - ready
    if name == NEW_TEXT_ONLY:
        exact = "(pieces only)"
    row = {"request_ms": statistics.median(times) * 1e3, "burst_ms": burst_ms, "exact": exact, **served.spanning(rows)}
    row["burst_final"] = rows[0]["final"]
    row["seconds_after_accelerate"] = window_s  # when the last request was answered
    for final, label in ((False, "not_final"), (True, "final")):
        if by_final[final] and by_final[not final]:
            row[f"request_ms_{label}"] = statistics.median(by_final[final]) * 1e3
            row[f"requests_{label}"] = len(by_final[final])
    return row


def agents(quick: bool = False, conversations: int = AGENTS, turns: int = TURNS, guarded: bool = False) -> dict:
    """Per-request medians on growing conversations (each agent's turns in order, agents
    interleaved), and a fresh replica's first burst of 40 agents sharing the system prompt; the
    same for auto in the first seconds after accelerate() on a fresh process (`FIRST_SECONDS`).
    quick: HF, raw fastokens and auto only, after the final build and in the first seconds.
    guarded: every conversation's first user message holds a code point of gigatoken's Unicode
    guard (`guarded_code_points`), which the guarded piece sends to HuggingFace.

    Each encoder runs in a process of its own. In one process, every backend's thread pool kept
    spinning while the next encoder was timed: on 2 cores that doubled the medians of the rows
    measured after gigatoken and fastokens (tokbackend fastokens 0.51 ms in one process, 0.24-0.27
    ms alone)."""
    names = (*(QUICK_AGENT_ENCODERS if quick else AGENT_ENCODERS), FIRST_SECONDS)
    options = ("--agents", str(conversations), "--turns", str(turns), *(("--guarded",) if guarded else ()))
    table = {name: _in_child("agents", name, 0, options=options) for name in names}
    base = table["HF"]["request_ms"]
    theirs = table.get("fastokens + its segment cache", table["raw fastokens (.ids)"])["request_ms"]
    their_name = "fastokens' cache" if "fastokens + its segment cache" in table else "raw fastokens"
    hf_burst = table["HF"]["burst_ms"]
    lines = [
        f"| encoder | served by | per-request median ms ({conversations} agents x {turns} turns) | vs HF | "
        f"/ {their_name} | first burst of {BURST} agents ms | burst vs HF | ids identical |",
        "|---|---|---:|---:|---:|---:|---:|---|",
        *(
            f"| {name} | {served.label(row)} | {row['request_ms']:.2f} | {base / row['request_ms']:.0f}x "
            f"| {row['request_ms'] / theirs:.2f} | {row['burst_ms']:.1f} | {hf_burst / row['burst_ms']:.0f}x | "
            f"{row['exact']} |"
            for name, row in table.items()
        ),
    ]
    return {"table": table, "markdown": "\n".join(lines)}


def chart(speed_json: Path, agents_json: Path | None, output: Path) -> None:
    """One chart of every encoder: one 32k prompt, a burst of 40 and (when given) the agent
    workload, each as the speed-up over HF measured in the same run (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = json.loads(speed_json.read_text())
    panels = [
        ("one 32k-token prompt", {name: row["single_ms"] for name, row in speed["table"].items()}),
        ("burst of 40 x 32k", {name: row["burst_ms"] for name, row in speed["table"].items()}),
    ]
    if agents_json is not None:
        agents = json.loads(agents_json.read_text())
        title = "agent turn (segments repeat)"
        if agents.get("host", speed["host"]) != speed["host"]:
            title += "\n" + agents["host"]
        panels.append((title, {name: row["request_ms"] for name, row in agents["table"].items()}))
    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5), sharey=False)
    for axis, (title, milliseconds) in zip(axes, panels):
        names = [name for name in milliseconds if name != "HF"]
        axis.barh(names, [milliseconds["HF"] / milliseconds[name] for name in names], color="#4477aa")
        axis.set_xscale("log")
        axis.set_title(title)
        axis.set_xlabel("speed-up over HF (same run)")
        axis.invert_yaxis()
    figure.suptitle(speed["host"])
    figure.tight_layout()
    figure.savefig(output, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["speed", "scaling", "stalls", "agents", "cache-cost", "child"])
    parser.add_argument("--prompts", type=int, default=None)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--cold", action="store_true", help="scaling: a fresh backend for each burst (a new replica)")
    parser.add_argument("--merge", type=Path, help="scaling: a backends-scaling.json to add these counts to")
    parser.add_argument(
        "--quick", action="store_true", help="agents: HF, raw fastokens and auto only (steady, first seconds)"
    )
    parser.add_argument("--agents", type=int, default=AGENTS, help="agents: conversations, interleaved")
    parser.add_argument("--turns", type=int, default=TURNS, help="agents: turns of each conversation")
    parser.add_argument("--guarded", action="store_true", help="agents: each conversation holds a guarded code point")
    parser.add_argument("--child-mode", help=argparse.SUPPRESS)
    parser.add_argument("--competitor", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.mode == "child" and arguments.child_mode == "cache-cost":
        print("RESULT " + json.dumps(_cache_cost_child(arguments.competitor, arguments.prompts)))
        return
    if arguments.mode == "child" and arguments.child_mode == "agents":
        print(
            "RESULT "
            + json.dumps(_agents_row(arguments.competitor, arguments.agents, arguments.turns, arguments.guarded))
        )
        return
    if arguments.mode == "child":
        _child(arguments.child_mode, arguments.competitor, arguments.prompts)
        return
    if arguments.mode == "speed":
        result = speed(arguments.prompts or 12)
    elif arguments.mode == "scaling":
        result = scaling(arguments.threads, arguments.merge, arguments.cold)
    elif arguments.mode == "cache-cost":
        result = cache_cost(arguments.prompts or 80)
    elif arguments.mode == "agents":
        result = agents(arguments.quick, arguments.agents, arguments.turns, arguments.guarded)
    else:
        result = stalls(arguments.prompts or 3000)
    machine = platform.processor() or platform.machine()
    header = f"{datetime.date.today()}, {os.cpu_count()} cores, {machine}, Python {platform.python_version()}"
    print(header)
    print(result["markdown"])
    output = Path(os.environ.get("OUT", ROOT / "bench")) / f"backends-{arguments.mode}.json"
    output.write_text(json.dumps({"host": header, **result}, indent=1))


if __name__ == "__main__":
    main()
