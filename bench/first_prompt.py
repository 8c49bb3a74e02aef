"""The first distinct long prompt after start-up against a later one, in one fresh process per
backend: whatever makes the first slower (lazy initialisation in the backend, page faults, thread
pools, the segment cache) is what a replica's first burst pays.

  python bench/first_prompt.py [--rounds 3] [--json bench/first-prompt.json]

Each child loads Qwen3.6 with one backend (`tokbackend.load`, its warm-up included), makes
`PROMPTS` distinct ~32k-token prompts (before any timing), then encodes them in order through the
accelerated tokenizer, each once. The ratio is the first prompt's time over the median of the
last three, in the same process; medians over `--rounds` fresh processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = 6
TOKENS = 32768

CHILD = r"""
import json, sys, time
backend, output = sys.argv[1:3]
sys.path.insert(0, ".")
import tokbackend
from bench.workloads import unseen_prompt
tokenizer = tokbackend.load("qwen3.6", backend)
prompts = [unseen_prompt(TOKENS) for _ in range(PROMPTS)]
seconds = []
for prompt in prompts:
    started = time.perf_counter()
    tokenizer.encode(prompt)
    seconds.append(time.perf_counter() - started)
stats = tokenizer.tokbackend.stats()
result = {"seconds": seconds, "fast_texts": stats["fast_texts"], "backend": stats["backend"]}
open(output, "w").write(json.dumps(result))
""".replace("TOKENS", str(TOKENS)).replace("PROMPTS", str(PROMPTS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", nargs="*", default=["fastokens", "gigatoken"])
    parser.add_argument("--json", type=Path)
    arguments = parser.parse_args()
    runs: dict[str, list[list[float]]] = {backend: [] for backend in arguments.backends}
    with tempfile.TemporaryDirectory() as work:
        for round_ in range(arguments.rounds):
            for backend in arguments.backends if round_ % 2 == 0 else arguments.backends[::-1]:
                output = Path(work) / "out.json"
                environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
                subprocess.run(
                    [sys.executable, "-c", CHILD, backend, str(output)], env=environment, check=True, cwd=ROOT
                )
                run = json.loads(output.read_text())
                assert run["backend"] == backend and run["fast_texts"] == PROMPTS, run
                runs[backend].append(run["seconds"])
    rows = []
    for backend, samples in runs.items():
        first = statistics.median(run[0] for run in samples)
        later = statistics.median(statistics.median(run[-3:]) for run in samples)
        rows.append(
            {
                "backend": backend,
                "first_ms": first * 1000,
                "later_ms": later * 1000,
                "ratio": first / later,
                "runs": samples,
            }
        )
        print(
            f"{backend:<10} first 32k prompt {first * 1000:.1f} ms, later {later * 1000:.1f} ms: {first / later:.2f}x",
            flush=True,
        )
    if arguments.json:
        arguments.json.write_text(json.dumps({"cpu_count": os.cpu_count(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
