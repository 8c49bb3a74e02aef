"""One ~32k-token prompt in one process: each lane's backend alone and through `accelerate()`, on
text it has not seen and on the same text again (ms, medians).

The bench of a server (bench/servers.py's request_32k) sends prompts no request sent before;
gigatoken's speed comes from its cache of pieces, so its time on unseen text is its own encode's,
and a repeat is its cache's (through `accelerate()`, the segment cache's). The array form is the
one SGLang asks for (text prompts). The rows "as a chat prompt" send each text rendered by the
chat template (a system message, then the text as the user's): its added tokens take it through
the segment cache.

  python bench/one_text.py [--texts 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _medians(encode: Callable[[str], object], texts: list[str]) -> tuple[float, float]:
    """The median ms of `encode` on each text unseen, then on each again."""
    medians = []
    for _visit in range(2):
        times = []
        for text in texts:
            start = time.perf_counter()
            encode(text)
            times.append((time.perf_counter() - start) * 1e3)
        medians.append(statistics.median(times))
    return medians[0], medians[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=12, help="unseen ~32k-token texts per row")
    arguments = parser.parse_args()

    import tokbackend
    from bench.servers import texts_32k
    from tokbackend.backends._fastokens import FastokensBackend
    from tokbackend.backends._gigatoken import GigatokenBackend

    hf = tokbackend.load_hf("qwen3.6")
    tokenizer_json = hf.backend_tokenizer.to_str()

    def chat_prompt(text: str) -> str:
        messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": text}]
        return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    rows: list[tuple[str, Callable[[str], object], bool]] = []  # (name, encode, as a chat prompt)
    for backend_class in (GigatokenBackend, FastokensBackend):
        backend = backend_class(tokenizer_json)
        backend.prepare()
        rows.append((f"{backend_class.name} alone, encode_array", backend.encode_array, False))
    for lane in ("gigatoken", "auto"):
        accelerated = tokbackend.accelerate(hf, lane)

        def as_arrays(text: str, accelerated=accelerated) -> object:
            with tokbackend.ids_as_arrays():
                return accelerated.encode(text)

        served = accelerated.tokbackend.routing.lane.name
        rows.append((f"accelerate(hf, {lane!r}) ({served}), arrays", as_arrays, False))
        rows.append((f"accelerate(hf, {lane!r}) ({served}), arrays, as a chat prompt", as_arrays, True))
    print(f"{'':64s} {'unseen':>8s} {'again':>8s}")
    for index, (name, encode, as_chat) in enumerate(rows):
        encode("warm-up " * 100)
        texts = texts_32k(2_000 + 100 * index, arguments.texts)
        unseen, again = _medians(encode, [chat_prompt(text) for text in texts] if as_chat else texts)
        print(f"{name:64s} {unseen:8.2f} {again:8.2f}")


if __name__ == "__main__":
    main()
