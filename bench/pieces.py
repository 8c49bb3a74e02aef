"""Raw fastokens on one ~32k-token prompt, whole and as a batch of its pieces (ms, medians).

Whether one long text is faster as a batch of its pieces (bench/RESULTS.md's section "One long
text as a batch of its pieces: tried, not kept": not through SGLang, so tokbackend does not cut
one): each row cuts
unseen prompts into pieces of at least N characters after a newline before a printable ASCII
character (1: the whole text) and times `encode_batch_flat` on them, wall and CPU, then the same
prompts again. Run it on the machine whose cores matter (16 on the device:
`PYTHONPATH=.:/tmp/site python3 bench/pieces.py`).

  python bench/pieces.py [--texts 100]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = (1, 32768, 16384, 8192, 4096, 2048)
CUT = re.compile(r"\n(?=[!-~])")  # after the newline


def cut(text: str, piece_chars: int) -> list[str]:
    """`text` in pieces of at least `piece_chars` characters, each but the last ending at a cut."""
    size, pieces, start, position = len(text), [], 0, piece_chars
    while size - position >= piece_chars:
        found = CUT.search(text, position, min(position + piece_chars, size - piece_chars) + 1)
        if found is None:
            position += piece_chars
            continue
        pieces.append(text[start : found.end()])
        start, position = found.end(), found.end() + piece_chars
    return [*pieces, text[start:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=100, help="unseen ~32k-token prompts, shared out over the rows")
    arguments = parser.parse_args()

    import os

    import tokbackend
    from bench.servers import texts_32k
    from tokbackend.backends._fastokens import FastokensBackend

    backend = FastokensBackend(tokbackend.load_hf("qwen3.6").backend_tokenizer.to_str())
    backend.prepare()
    flat = backend._rust.encode_batch_flat  # the call `encode_batch_arrays` makes

    def pieces(text: str, size: int) -> list[str]:
        return [text] if size == 1 else cut(text, size)

    texts = texts_32k(5_000, arguments.texts)
    times: dict[int, list[tuple[float, float]]] = {size: [] for size in SIZES}
    again: dict[int, list[float]] = {size: [] for size in SIZES}
    for visit in range(2):
        for index, text in enumerate(texts):
            size = SIZES[index % len(SIZES)]
            batch = pieces(text, size)
            wall, cpu = time.perf_counter(), time.process_time()
            flat(batch)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if visit == 0:
                times[size].append((wall * 1e3, cpu * 1e3))
            else:
                again[size].append(wall * 1e3)
    print(f"{os.cpu_count()} cores; pieces of at least N characters (1: whole), ms")
    print(f"{'N':>6s} {'unseen':>8s} {'cpu':>8s} {'again':>8s}")
    for size in SIZES:
        print(
            f"{size:6d} {statistics.median(w for w, _ in times[size]):8.3f} "
            f"{statistics.median(c for _, c in times[size]):8.3f} {statistics.median(again[size]):8.3f}"
        )


if __name__ == "__main__":
    main()
