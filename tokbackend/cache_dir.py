"""Where tokbackend keeps what it builds: built-in models and derived guard records."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "TOKBACKEND_CACHE_DIR"


def cache_dir() -> Path:
    """$TOKBACKEND_CACHE_DIR, else $XDG_CACHE_HOME/tokbackend, else ~/.cache/tokbackend."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokbackend"
