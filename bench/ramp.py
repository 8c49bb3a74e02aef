"""Ramp simulation: N prompts arrive at once at one tokenizer worker. When is each one's ids ready?

Usage: python bench/ramp.py [--prompts 40] [--tokens 32000]

HF serial: the worker encodes the prompts one after another, so prompt i is ready after the first
i encodes. tokbackend: (a) the same serial loop with the accelerated encode, (b) one batch call
(`tokenizer(list)`, gigatoken's thread pool), where every prompt is ready when the call returns.
Reports time-to-tokenized p50 / p99 / the whole burst, each variant on prompts it has not seen.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import workloads  # noqa: E402


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
    arguments = parser.parse_args()
    hf, fast = workloads.hf_tokenizer(), workloads.accelerated()
    variants = {
        "HF serial": lambda prompts: serial_ready_times(hf.encode, prompts),
        "tokbackend serial": lambda prompts: serial_ready_times(fast.encode, prompts),
        "tokbackend batch": lambda prompts: batch_ready_times(lambda texts: fast(texts)["input_ids"], prompts),
    }
    rows = ["| variant | p50 ms | p99 ms | whole burst ms | p50 vs HF |", "|---|---:|---:|---:|---:|"]
    reference = None
    for name, run in variants.items():
        prompts = [workloads.unseen_prompt(arguments.tokens) for _ in range(arguments.prompts)]
        ready = run(prompts)
        p50, p99, whole = statistics.median(ready), percentile(ready, 0.99), max(ready)
        reference = reference or p50
        rows.append(f"| {name} | {p50 * 1000:.1f} | {p99 * 1000:.1f} | {whole * 1000:.1f} | {reference / p50:.1f}x |")
    print(f"{arguments.prompts} prompts of {arguments.tokens} tokens arriving at once at one worker:\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
