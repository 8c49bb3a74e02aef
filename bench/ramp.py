"""Ramp simulation: N prompts arrive at once at one tokenizer worker. When is each one's ids ready?

Usage: python bench/ramp.py [--prompts 40] [--tokens 32000] [--json ramp.json]

HF serial: the worker encodes the prompts one after another, so prompt i is ready after the first
i encodes. tokbackend: (a) the same serial loop with the accelerated encode, (b) one batch call
(`tokenizer(list)`, the backend's thread pool), where every prompt is ready when the call returns,
once the final build serves, and (c) that batch call at once after `accelerate()`, as on a fresh
replica (the backends' warm-ups not yet done). Reports time-to-tokenized p50 / p99 / the whole burst,
each variant on prompts it has not seen, and what served it (bench/served.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import served, workloads  # noqa: E402


def serial_ready_times(encode, prompts: list[str]) -> list[float]:
    started = time.perf_counter()
    ready = []
    for prompt in prompts:
        encode(prompt)
        ready.append(time.perf_counter() - started)
    return ready


def batch_ready_times(encode_batch, prompts: list[str]) -> list[float]:
    started = time.perf_counter()
    encode_batch(prompts)
    return [time.perf_counter() - started] * len(prompts)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=32_000)
    parser.add_argument("--json", type=Path, help="write the rows here")
    arguments = parser.parse_args()
    import tokbackend

    hf, fast = workloads.hf_tokenizer(), workloads.accelerated()

    def on(tokenizer, ready_times):
        return lambda prompts: served.during(tokenizer, lambda: ready_times(prompts))

    def fresh_replica_batch(prompts):
        # one batch call is served by one build: the one serving when it starts, read here
        replica = tokbackend.accelerate(tokbackend.load_hf(workloads.MODEL))
        row = served.row_of(replica)
        return batch_ready_times(lambda texts: replica(texts)["input_ids"], prompts), row

    variants = {  # prompts -> (ready times, what served them)
        "HF serial": on(hf, lambda prompts: serial_ready_times(hf.encode, prompts)),
        "tokbackend serial": on(fast, lambda prompts: serial_ready_times(fast.encode, prompts)),
        "tokbackend batch": on(
            fast, lambda prompts: batch_ready_times(lambda texts: fast(texts)["input_ids"], prompts)
        ),
        "tokbackend batch, at once after accelerate()": fresh_replica_batch,
    }
    lines = ["| variant | served by | p50 ms | p99 ms | whole burst ms | p50 vs HF |", "|---|---|---:|---:|---:|---:|"]
    rows, reference = {}, None
    for name, run in variants.items():
        prompts = [workloads.unseen_prompt(arguments.tokens) for _ in range(arguments.prompts)]
        ready, row = run(prompts)
        p50, p99, whole = statistics.median(ready), percentile(ready, 0.99), max(ready)
        reference = reference or p50
        rows[name] = {"p50_ms": p50 * 1000, "p99_ms": p99 * 1000, "whole_ms": whole * 1000, **row}
        cells = " | ".join(f"{rows[name][key]:.1f}" for key in ("p50_ms", "p99_ms", "whole_ms"))
        lines.append(f"| {name} | {served.label(row)} | {cells} | {reference / p50:.1f}x |")
    print(f"{arguments.prompts} prompts of {arguments.tokens} tokens arriving at once at one worker:\n")
    print("\n".join(lines))
    if arguments.json:
        arguments.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
