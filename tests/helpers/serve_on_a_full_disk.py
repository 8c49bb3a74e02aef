"""Child process for the full-disk test: serve a tokenizer whose guard no record holds, where no
file can take a byte.

Usage: python serve_on_a_full_disk.py CACHE_DIR MODEL_DIR
Loads MODEL_DIR, then lowers RLIMIT_FSIZE to 0 (every write to a file fails with EFBIG, after the
directory and the file were made, as a full disk fails with ENOSPC), accelerates it with `auto`
(a narrowed derivation, no shipped record applying), writes a built-in model's folder into the
cache, and prints one JSON line: the start-up phase, the backend, whether the ids equal HF's, the
guard's source, tokbackend's WARNING lines and the model folder's OSError.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys
from pathlib import Path

import tokbackend
from tokbackend._guard import GuardSettings
from tokbackend._models.qwen import write_tokenizer_dir

TEXTS = ["Hello!", "The letter \U000323b0's \u1ae6 text", "<|begin_of_text|>hi"]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    cache, model = sys.argv[1], sys.argv[2]
    os.environ["TOKBACKEND_CACHE_DIR"] = cache
    settings = GuardSettings(
        code_points=(*range(0x323B0, 0x32400), *range(0x1AC0, 0x1B00)), shipped_records=Path(cache) / "none"
    )
    handler = Collect()
    logging.getLogger("tokbackend").addHandler(handler)
    hf = tokbackend.load_hf(model)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    fast = tokbackend.accelerate(hf, "auto", guard=settings, strict=True)
    stats = fast.tokbackend.stats()
    try:  # a built-in model's files, which fail to be written as the record did
        write_tokenizer_dir(Path(cache) / "qwen3-v1", {"added_tokens": []}, {})
    except OSError as error:
        model_error = str(error)
    print(
        json.dumps(
            {
                "phase": stats["start_up"]["phase"],
                "backend": stats["backend"],
                "exact": [fast.encode(text) for text in TEXTS] == [hf.encode(text) for text in TEXTS],
                "guard": stats["guard"],
                "warnings": handler.messages,
                "model_error": model_error,
            }
        )
    )


if __name__ == "__main__":
    main()
