"""pytest-benchmark settings for bench/: every round gets prompts no tokenizer has seen."""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ is run as `pytest bench/ --benchmark-only` from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
