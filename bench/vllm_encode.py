"""vLLM's completions encode of one 32k-token prompt, stock (`--tokenizer-mode hf`) against
tokbackend's modes, through vLLM's own renderer: its kwargs (`truncation=True,
max_length=max_model_len + 1`) and its tokenizer thread pool. Run in the vLLM venv (see
.ci/run's vLLM stage):

  pip install faker  # the prompt corpus
  VLLM_TARGET_DEVICE=cpu python bench/vllm_encode.py [--prompts 9] [--modes hf gigatoken tokbackend-auto]

Prints a Markdown table (median ms per prompt, ratio to stock in the same run, ids identical,
the backend that served and whether its build was final: each mode waits for the final build).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "vllm"))

from bench import served  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=9)
    parser.add_argument("--modes", nargs="+", default=["hf", "gigatoken", "tokbackend-fastokens", "tokbackend-auto"])
    arguments = parser.parse_args()

    from conftest import vllm_config
    from vllm.plugins import load_general_plugins
    from vllm.renderers import renderer_from_config

    from tokbackend.equivalence.corpus import prompt_text
    from tokbackend.equivalence.server_models import tiny_qwen3_model

    load_general_plugins()
    directory = tiny_qwen3_model(Path(tempfile.mkdtemp()), "qwen3.6")
    prompts = [prompt_text(40_000_000 + index, 130_000) for index in range(arguments.prompts)]
    rows, reference = {}, None
    for mode in arguments.modes:
        renderer = renderer_from_config(vllm_config(str(directory), mode, max_model_len=65536))
        tokenizer, kwargs = renderer.get_tokenizer(), renderer.default_cmpl_tok_params.get_encode_kwargs()
        served.steady(tokenizer)
        tokenizer(prompts[0][:1000], **kwargs)
        serving = tokenizer if hasattr(tokenizer, "tokbackend") else f"{mode} (no tokbackend)"
        before = served.row_of(serving)
        times, ids = [], []
        for prompt in prompts:
            started = time.perf_counter()
            ids.append(tokenizer(prompt, **kwargs)["input_ids"])
            times.append(time.perf_counter() - started)
        reference = reference or ids
        stats = tokenizer.tokbackend.stats() if hasattr(tokenizer, "tokbackend") else {}
        rows[mode] = {
            "ms": statistics.median(times) * 1e3,
            "identical": ids == reference,
            "tokens": statistics.median(len(sequence) for sequence in ids),
            "fallbacks": stats.get("fallbacks", {}),
            **served.spanning([before, served.row_of(serving)]),
        }
    stock = rows[arguments.modes[0]]["ms"]
    print(f"{datetime.date.today()}, {os.cpu_count()} cores, kwargs {kwargs}")
    print(
        "| --tokenizer-mode | served by | one ~32k-token prompt, ms (median) | speed-up vs stock | ids "
        "identical | fallbacks |"
    )
    print("|---|---|---:|---:|---|---|")
    for mode, row in rows.items():
        cells = f"{row['ms']:.2f} | {stock / row['ms']:.1f}x | {row['identical']} | {row['fallbacks'] or '-'}"
        print(f"| {mode} | {served.label(row)} | {cells} |")


if __name__ == "__main__":
    main()
