"""Child process for the derivation-lock test: accelerate a model that has no guard record.

Usage: python derive_concurrently.py CACHE_DIR
Narrows the derivation to a few blocks and reads shipped records from an empty directory (so
none applies), accelerates Qwen3.6, and prints one JSON line: whether this process derived the
guard, a digest of the guard, and the seconds accelerate() took.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path

import tokbackend
from tokbackend._guard import GuardSettings

EXTENSION_J = list(range(0x323B0, 0x32400))


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    os.environ["TOKBACKEND_CACHE_DIR"] = sys.argv[1]
    settings = GuardSettings(
        code_points=(*EXTENSION_J, *range(0x1AC0, 0x1B00)), shipped_records=Path(sys.argv[1]) / "none"
    )
    handler = Collect()
    logging.getLogger("tokbackend").addHandler(handler)
    logging.getLogger("tokbackend").setLevel(logging.INFO)
    hf = tokbackend.load_hf("qwen3.6")
    started = time.perf_counter()
    fast = tokbackend.accelerate(hf, "gigatoken", guard=settings)
    seconds = time.perf_counter() - started
    derived = any("deriving the Unicode divergence guard" in message for message in handler.messages)
    digest = hashlib.sha256(json.dumps(sorted(fast.tokbackend.guard.code_points)).encode()).hexdigest()[:16]
    print(json.dumps({"derived": derived, "guard": digest, "seconds": round(seconds, 2)}))


if __name__ == "__main__":
    main()
