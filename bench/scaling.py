"""Multi-core scaling of the burst: 40 unseen 32k-token prompts through the accelerated batch call
with gigatoken's thread pool limited to 1, 2, 4, 8, 16 threads (one child process per count,
since the pool size is fixed at its first use).

Usage: python bench/scaling.py [--threads 1 2 4 8 16] [--rounds 3]
Prints a Markdown table for bench/RESULTS.md, with the CPU and the date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(rounds: int) -> None:
    sys.path.insert(0, str(ROOT))
    from bench import workloads

    fast, hf = workloads.accelerated(), workloads.hf_tokenizer()
    times, hf_times = [], []
    for _ in range(rounds):
        burst = [workloads.unseen_prompt(32_000) for _ in range(40)]
        started = time.perf_counter()
        fast(burst)
        times.append(time.perf_counter() - started)
    for _ in range(3):  # HF's serial encode of one prompt, to express the burst as a ratio
        prompt = workloads.unseen_prompt(32_000)
        started = time.perf_counter()
        hf.encode(prompt)
        hf_times.append(time.perf_counter() - started)
    result = {"burst_s": statistics.median(times), "first_burst_s": times[0], "hf_prompt_s": statistics.median(hf_times)}
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        child(arguments.rounds)
        return
    from bench.report import _cpu_model

    rows = [
        "| threads | first burst ms | burst ms (median) | HF serial estimate ms | vs HF serial | scaling vs 1 thread |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    base = None
    for threads in arguments.threads:
        environment = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        output = subprocess.run(
            [sys.executable, __file__, "--child", "--rounds", str(arguments.rounds)],
            env=environment, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        result = json.loads(output.strip().splitlines()[-1])
        hf_serial = 40 * result["hf_prompt_s"]
        base = base or result["burst_s"]
        rows.append(
            f"| {threads} | {result['first_burst_s'] * 1000:.0f} | {result['burst_s'] * 1000:.0f} | {hf_serial * 1000:.0f} "
            f"| {hf_serial / result['burst_s']:.0f}x | {base / result['burst_s']:.1f}x |"
        )
    print(f"Burst of 40 unseen 32k-token mixed prompts, {_cpu_model()}, {os.cpu_count()} cores, {datetime.date.today()}\n")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
