"""fastokens' two single-text forms, in one process: `Encoding.ids` (what the backend serves with)
against `encode_batch_flat([text])`'s buffer, ms medians over unseen texts of several lengths, and
the ratio flat / ids (above 1: `Encoding.ids` is faster). Writes bench/fastokens-forms.json.

  python bench/fastokens_forms.py [--texts 9]
"""

from __future__ import annotations

import argparse
import array
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=9)
    texts_per_size = parser.parse_args().texts
    import fastokens

    import tokbackend
    from tokbackend.backends._warmup import builtin_texts

    rust = fastokens.Tokenizer.from_json_str(tokbackend.load_hf("qwen3").backend_tokenizer.to_str())
    rust.no_truncation()
    rust.no_padding()
    rust.encode_batch(list(builtin_texts())[:10])  # its thread pool and allocators, as `prepare()` does
    corpus = " ".join(builtin_texts())
    forms = {
        "ids": lambda text: rust.encode(text).ids,
        "flat": lambda text: array.array("I", rust.encode_batch_flat([text])[0]).tolist(),
    }
    rows = {}
    for length in (300, 3_000, 30_000, 130_000):
        seconds: dict[str, list[float]] = {name: [] for name in forms}
        for index in range(texts_per_size):  # a fresh slice per text; alternate which form meets it first
            start = (index * 7919 * length) % max(1, len(corpus) - length)
            text = corpus[start : start + length]
            for name in forms if index % 2 == 0 else reversed(forms):
                began = time.perf_counter()
                forms[name](text)
                seconds[name].append(time.perf_counter() - began)
        ids_ms, flat_ms = (statistics.median(seconds[name]) * 1e3 for name in ("ids", "flat"))
        rows[str(length)] = {"ids_ms": ids_ms, "flat_ms": flat_ms, "flat_over_ids": flat_ms / ids_ms}
        print(f"{length:>7} characters: ids {ids_ms:.3f} ms, flat {flat_ms:.3f} ms, flat/ids {flat_ms / ids_ms:.2f}")
    host = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    version = getattr(fastokens, "__version__", "?")
    result = {"host": host, "fastokens": version, "rows": rows}
    (Path(__file__).parent / "fastokens-forms.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
