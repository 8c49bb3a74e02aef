"""A fresh replica's start-up: `tokbackend.accelerate()` against HF's own `from_pretrained` of the
same tokenizer, in a fresh process with an empty cache, for built-in models and models of other
families, with `auto` and with `gigatoken`, with the shipped guard records and without them (as
for a pipeline we do not ship: the guard is derived at start-up).

  python bench/boot.py [--json bench/boot.json]
  python bench/boot.py --sglang [--repeat 3]   # in an SGLang venv (CONTRIBUTING.md)

`--sglang`: SGLang's own `get_tokenizer` on Qwen3.6 in a fresh process, stock
(`--tokenizer-backend huggingface`) against `tokbackend-auto`, in two roles: the scheduler's
(`Scheduler.init_tokenizer`, SGLang's code, which encodes no prompts) and the tokenizer manager's
(which builds). Rows alternate stock and flag within each round; medians over the rounds, and the
flag's cost as a difference and a ratio against stock measured in the same run.

"ready" is `accelerate()` returning (its one build: the backend loaded, the exact guard found or
derived, the probe passed) plus the first encode of a non-ASCII text, answered by the backend;
the ratio is ready / HF's load, both in the same process. Each row says what served the first
encode (`backend`, and `final`, which 0.2.0's builds always are), read from `stats()`
(`bench/served.py`). Rows from releases with an early start also carry `final_s` and
`final_backend` (when the final build was swapped in, and what served it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# built-in models, then families tokbackend ships records for, then SentencePiece-style families
# it ships none for (a 32k-piece vocabulary HF loads in ~0.15 s: fixed costs show there)
MODELS = ("qwen3.6", "qwen3", "llama3", "deepseek-v3", "gpt-oss", "gemma3", "mistral-metaspace")
TEXT = "Ready? 毕老师说：naïve café, Привет, 🤖 1234"

CHILD = r"""
import json, sys, time
from pathlib import Path
directory, mode, shipped, output = sys.argv[1:5]
import transformers  # imports are not start-up work of either side
from transformers import AutoTokenizer
import tokbackend
from bench import served
from tokbackend._process import preload
tokbackend.preload()  # as the server plugins do, while the server does its other start-up work
preload.wait()  # the backends' libraries: imports are not start-up work of either side
from tokbackend._guard import GuardSettings
settings = GuardSettings(shipped_records=Path(directory) / "no-shipped-records") if shipped == "no" else GuardSettings()
started = time.perf_counter()
hf = AutoTokenizer.from_pretrained(directory, local_files_only=True)
hf_s = time.perf_counter() - started
plain = AutoTokenizer.from_pretrained(directory, local_files_only=True)
started = time.perf_counter()
fast = tokbackend.accelerate(plain, mode, guard=settings)
accelerate_s = time.perf_counter() - started
ids = fast.encode(TEXT)
ready_s = time.perf_counter() - started
stats = fast.tokbackend.stats()
Path(output).write_text(json.dumps({
    "hf_load_s": hf_s, "accelerate_s": accelerate_s, "ready_s": ready_s,
    "fast_path_answered": stats["fast_texts"] == 1, "ids_equal_hf": ids == hf.encode(TEXT),
    "backend": served.served_by(stats), "final": served.is_final(stats), "guard": stats["guard"],
}))
""".replace("TEXT", repr(TEXT))


SGLANG_CHILD = r"""
import json, sys, time
from pathlib import Path
from types import SimpleNamespace
directory, backend, role, output = sys.argv[1:5]
from sglang.srt.plugins import load_plugins
load_plugins()  # as each SGLang process does at start
from tokbackend._process import preload
preload.wait()  # the backends' libraries: imports are not start-up work of either side
from sglang.srt.entrypoints import engine
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer
arguments = ServerArgs(model_path=directory, tokenizer_backend=backend, device="cpu", skip_server_warmup=True)
if hasattr(arguments, "resolve_once"):
    arguments.resolve_once()
arguments.check_server_args()
engine.resolve_auto_parsers(arguments)
if hasattr(engine, "publish"):
    engine.publish(arguments, role="tokenizer")
started = time.perf_counter()
if role == "scheduler":
    scheduler = SimpleNamespace(
        server_args=arguments,
        model_config=SimpleNamespace(is_generation=True, is_multimodal=False),
        skip_tokenizer_init=False,
    )
    Scheduler.init_tokenizer(scheduler)
    tokenizer = scheduler.tokenizer
else:
    tokenizer = get_tokenizer(directory, tokenizer_backend=backend)
seconds = time.perf_counter() - started
state = getattr(tokenizer, "tokbackend", None)
Path(output).write_text(json.dumps({"seconds": seconds, "built": state is not None and state.fast_path_enabled}))
"""


def sglang_roles(work: Path, rounds: int, roles: list[str]) -> list[dict[str, object]]:
    """`--sglang` (see the module docstring): one row per role."""
    import statistics

    from tokbackend.equivalence.server_models import tiny_qwen3_model

    directory = tiny_qwen3_model(work / "qwen3.6-model", "qwen3.6", max_positions=32768)
    lanes = [(role, backend) for role in roles for backend in ("huggingface", "tokbackend-auto")]
    seconds: dict[tuple[str, str], list[float]] = {lane: [] for lane in lanes}
    built: dict[tuple[str, str], set[bool]] = {lane: set() for lane in lanes}
    for round_ in range(rounds):
        for role, backend in lanes if round_ % 2 == 0 else lanes[::-1]:
            cache = work / "cache"
            shutil.rmtree(cache, ignore_errors=True)  # every child starts on an empty cache
            output = work / "out.json"
            environment = {**os.environ, "TOKBACKEND_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
            command = [sys.executable, "-c", SGLANG_CHILD, str(directory), backend, role, str(output)]
            subprocess.run(command, env=environment, check=True, timeout=900, cwd=ROOT)
            run = json.loads(output.read_text())
            print(f"  round {round_}: {role} {backend}: {run['seconds']:.2f} s (built: {run['built']})", flush=True)
            seconds[(role, backend)].append(run["seconds"])
            built[(role, backend)].add(run["built"])
    rows: list[dict[str, object]] = []
    for role in roles:
        stock = statistics.median(seconds[(role, "huggingface")])
        flag = statistics.median(seconds[(role, "tokbackend-auto")])
        rows.append(
            {
                "role": role,
                "stock_s": stock,
                "flag_s": flag,
                "flag_minus_stock_s": flag - stock,
                "ratio": flag / stock,
                "runs_s": {
                    backend: [round(value, 2) for value in seconds[(role, backend)]]
                    for backend in ("huggingface", "tokbackend-auto")
                },
                "flag_built": sorted(built[(role, "tokbackend-auto")]),
            }
        )
        print(
            f"SGLang {role:<9} get_tokenizer: stock {stock:.2f} s, tokbackend-auto {flag:.2f} s "
            f"(+{flag - stock:.2f} s, {flag / stock:.2f}x; built: {sorted(built[(role, 'tokbackend-auto')])})",
            flush=True,
        )
    return rows


def model_dirs(work: Path) -> dict[str, Path]:
    """Each model's tokenizer files in a directory of its own (built once, before any timing)."""
    import tokbackend
    from tokbackend.equivalence.families import build_family

    dirs = {}
    for name in MODELS:
        directory = work / name
        if name in ("qwen3.6", "qwen3"):
            shutil.copytree(tokbackend._loading.resolve_model(name), directory)
        else:
            build_family(name, "real").save_pretrained(directory)
        dirs[name] = directory
    return dirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "boot.json")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes per row; the median ratio's run is kept")
    parser.add_argument("--sglang", action="store_true", help="SGLang's get_tokenizer by role (run in an SGLang venv)")
    parser.add_argument("--roles", nargs="*", default=["scheduler", "manager"], choices=["scheduler", "manager"])
    arguments = parser.parse_args()
    rows = []
    if arguments.sglang:
        with tempfile.TemporaryDirectory() as work:
            sglang_rows = sglang_roles(Path(work), max(arguments.repeat, 3), arguments.roles)
        if arguments.json:
            arguments.json.write_text(
                json.dumps({"cpu_count": os.cpu_count(), "sglang_roles": sglang_rows}, indent=1) + "\n"
            )
        return
    with tempfile.TemporaryDirectory() as work:
        dirs = model_dirs(Path(work))
        for name in arguments.models:
            for mode in ("auto", "gigatoken"):
                for shipped in ("yes", "no"):
                    runs = []
                    for _ in range(arguments.repeat):
                        cache = Path(work) / "cache"
                        shutil.rmtree(cache, ignore_errors=True)  # every child starts on an empty cache
                        output = Path(work) / "out.json"
                        environment = {**os.environ, "TOKBACKEND_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
                        environment.pop("TOKBACKEND_GUARD_DIR", None)
                        command = [sys.executable, "-c", CHILD, str(dirs[name]), mode, shipped, str(output)]
                        subprocess.run(command, env=environment, check=True, timeout=900, cwd=ROOT)
                        run = {
                            "model": name,
                            "mode": mode,
                            "shipped_records": shipped,
                            **json.loads(output.read_text()),
                        }
                        run["ratio"] = run["ready_s"] / run["hf_load_s"]
                        runs.append(run)
                    runs.sort(key=lambda run: run["ratio"])
                    row = {
                        **runs[len(runs) // 2],
                        "ratios": [round(run["ratio"], 2) for run in runs],
                        "exact_in_every_run": all(run["ids_equal_hf"] and run["fast_path_answered"] for run in runs),
                    }
                    rows.append(row)
                    print(
                        f"{name:<12} {mode:<9} shipped records: {shipped:<3} HF {row['hf_load_s']:.2f} s, "
                        f"ready {row['ready_s']:.2f} s ({row['ratio']:.2f}x HF) on {row['backend']} "
                        f"({'final' if row['final'] else 'not final'}), "
                        f"fast path {row['fast_path_answered']}, ids equal {row['ids_equal_hf']} "
                        f"(in every run: {row['exact_in_every_run']})",
                        flush=True,
                    )
    if arguments.json:
        arguments.json.write_text(json.dumps({"cpu_count": os.cpu_count(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
