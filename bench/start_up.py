"""Processes starting at once, and the hot path of a plain call, for one tree or several.

    python bench/start_up.py                      # this install: at-once and hot rows
    python bench/start_up.py --trees OLD NEW      # each tree put first on PYTHONPATH, alternating

`at-once`: wall seconds of one process alone and of three started together, each doing what a
short-lived user of the package does (`tokbackend.load(model)` with "auto", one encode, exit),
with HuggingFace's own load of the same model (`load_hf`, nothing else) as the reference
measured in the same run. `hot`: median microseconds of a short text, a 32k-token prompt, a
batch of 8 and a chat template call on a final, prepared build, one fresh process per tree and
round. Every row names the backend that served and whether the build was final.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ONE = """
import sys, tokbackend
tok = tokbackend.load(sys.argv[1])
tok.encode("Hello! " * 100)
stats = tok.tokbackend.stats()
start_up = stats["start_up"]  # 0.2.0 names the phase; 0.1.0 said whether the build was final
backend = stats["routing"].get("backend", stats["routing"].get("single"))
print("SERVED", backend, start_up.get("phase", start_up.get("final")))
"""
HF_ONLY = "import sys, tokbackend; tokbackend.load_hf(sys.argv[1])"
HOT = """
import json, statistics, sys, time
import tokbackend
try:
    from tokbackend.backends._warmup import builtin_texts
except ImportError:  # 0.1.0 and its successors before the private modules
    from tokbackend.backends.warmup import builtin_texts
tok = tokbackend.load(sys.argv[1])
if hasattr(tok.tokbackend, "wait_until_prepared"):  # earlier releases prepared after accelerate()
    tok.tokbackend.wait_until_prepared(300)
long_text = " ".join(builtin_texts())[:130_000]
batch = [f"request {i}: Hello, how are you today?" for i in range(8)]
chat = [{"role": "user", "content": "What is 2+2? " * 20}]
calls = {"short": lambda: tok.encode("Hello, how are you today?"), "32k": lambda: tok.encode(long_text),
         "batch8": lambda: tok(batch)["input_ids"], "chat": lambda: tok.apply_chat_template(chat, tokenize=True)}
stats = tok.tokbackend.stats()
start_up = stats["start_up"]
routing = stats["routing"]
row = {"backend": routing.get("backend", routing.get("single")), "final": start_up.get("phase", start_up.get("final"))}
for name, call in calls.items():
    for _ in range(20):
        call()
    times = []
    for _ in range(20 if name == "32k" else 2000):
        started = time.perf_counter(); call(); times.append(time.perf_counter() - started)
    row[name + "_us"] = round(statistics.median(times) * 1e6, 2)
print("ROW", json.dumps(row))
"""


def _environment(tree: str | None) -> dict[str, str]:
    environment = dict(os.environ)
    if tree is not None:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, environment.get("PYTHONPATH")]))
    return environment


def _timed(code: str, model: str, tree: str | None, processes: int) -> tuple[float, list[str]]:
    started = time.perf_counter()
    children = [
        # from a neutral directory: `python -c` puts the working directory first on sys.path, where
        # a source tree there would shadow the one on PYTHONPATH
        subprocess.Popen(
            [sys.executable, "-c", code, model],
            env=_environment(tree),
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        for _ in range(processes)
    ]
    outputs = [child.communicate()[0] for child in children]
    if any(child.returncode for child in children):
        raise SystemExit(f"a process failed: {outputs}")
    return time.perf_counter() - started, outputs


def at_once(trees: list[str | None], model: str, rounds: int) -> list[dict]:
    rows = []
    for round_ in range(rounds):
        for tree in trees:
            for code, what in ((ONE, "tokbackend.load"), (HF_ONLY, "HF load_hf only")):
                alone, outputs = _timed(code, model, tree, 1)
                together, _ = _timed(code, model, tree, 3)
                served = [line.split()[1:] for line in outputs[0].splitlines() if line.startswith("SERVED")]
                backend, final = (served[0][0], served[0][1] in ("True", "final", "off")) if served else ("hf", True)
                rows.append(
                    {
                        "mode": "at-once",
                        "tree": tree or "installed",
                        "round": round_,
                        "what": what,
                        "backend": backend,
                        "final": final,
                        "one_s": round(alone, 2),
                        "three_s": round(together, 2),
                        "ratio": round(together / alone, 2),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


def hot(trees: list[str | None], model: str, rounds: int) -> list[dict]:
    rows = []
    for round_ in range(rounds):
        for tree in trees:
            _, outputs = _timed(HOT, model, tree, 1)
            row = json.loads(next(line for line in outputs[0].splitlines() if line.startswith("ROW"))[4:])
            rows.append({"mode": "hot", "tree": tree or "installed", "round": round_, **row})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="*", default=None, help="source trees to put first on PYTHONPATH, alternating")
    parser.add_argument("--model", default="qwen3.6")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", nargs="*", default=["at-once", "hot"], choices=["at-once", "hot"])
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    arguments = parser.parse_args()
    trees = arguments.trees or [None]
    rows = []
    if "at-once" in arguments.modes:
        rows += at_once(trees, arguments.model, arguments.rounds)
    if "hot" in arguments.modes:
        rows += hot(trees, arguments.model, arguments.rounds)
    if arguments.json is not None:
        arguments.json.write_text(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=1), encoding="utf-8")
    medians = {}
    for row in rows:
        if row["mode"] == "at-once":
            medians.setdefault((row["tree"], row["what"]), []).append(row["ratio"])
    for (tree, what), ratios in medians.items():
        print(f"{tree}: {what}: three at once / one alone, median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
