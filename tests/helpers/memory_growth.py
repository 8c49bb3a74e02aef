"""Child process for the memory test: encode many distinct random-word prompts, print RSS growth.

Usage: python memory_growth.py {accelerated|raw} BUDGET_MIB PROMPTS (of ~12k tokens each)
Prints one JSON line: {"growth_mib": ..., "renewals": ..., "instance_mib": ...}, the last what one
more gigatoken instance of the model holds (a renewal's fresh one, while it swaps).
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np

import tokbackend
from tokbackend._process.memory import release_freed_memory, resident_bytes
from tokbackend.backends._gigatoken import GigatokenBackend


def random_word_prompts(rng: np.random.Generator, count: int, characters: int) -> list[str]:
    """Prompts of random lowercase words: every word is new, the worst case for a pretoken cache."""
    prompts = []
    for _ in range(count):
        codes = rng.integers(97, 123, size=characters, dtype=np.uint8)
        codes[rng.random(characters) < 0.15] = 32
        prompts.append(codes.tobytes().decode("ascii"))
    return prompts


def main() -> None:
    mode, budget_mib, prompts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    hf = tokbackend.load_hf("qwen3.6")
    if mode == "raw":
        import gigatoken

        rust = gigatoken.Tokenizer.from_json(hf.backend_tokenizer.to_str()).backend

        def encode(batch):
            return rust.encode_batch_list(batch, parallel=True)
    else:
        tokenizer = tokbackend.accelerate(hf, "gigatoken", cache_budget_mib=budget_mib)

        def encode(batch):
            return tokenizer(batch)["input_ids"]

    rng = np.random.default_rng(0)
    encode(random_word_prompts(rng, 8, 25_000))  # warm: thread pool, result-list allocations
    release_freed_memory()
    before = resident_bytes()
    instance = GigatokenBackend(hf.backend_tokenizer.to_str(), GigatokenBackend.options_for_scanning())
    instance_mib = (resident_bytes() - before) / 2**20
    del instance
    release_freed_memory()
    baseline = resident_bytes()
    peak = baseline
    for _ in range(prompts // 40):
        encode(random_word_prompts(rng, 40, 25_000))
        peak = max(peak, resident_bytes())
    for thread in threading.enumerate():  # a renewal under way ends (its fresh instance counted)
        if thread.name == "tokbackend-renewal":
            thread.join()
            peak = max(peak, resident_bytes())
    renewals = 0 if mode == "raw" else tokenizer.tokbackend.stats()["cache_renewals"]
    print(json.dumps({"growth_mib": (peak - baseline) / 2**20, "renewals": renewals, "instance_mib": instance_mib}))


if __name__ == "__main__":
    main()
