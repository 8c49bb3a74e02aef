"""Where tokbackend keeps what it builds: built-in models and derived guard records."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger("tokbackend")

CACHE_DIR_ENV = "TOKBACKEND_CACHE_DIR"


def cache_dir() -> Path:
    """$TOKBACKEND_CACHE_DIR, else $XDG_CACHE_HOME/tokbackend, else ~/.cache/tokbackend."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokbackend"


def read_json_object(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON object `path` holds, or None where there is none to use: no file, or a file that
    is damaged (cut short, not JSON) or of the wrong shape (not an object). A kept file is a
    cache: a damaged one is a miss, logged at WARNING with the file and the cause (`what` says
    what it is), so that whoever reads it derives or chooses afresh and writes it anew; it never
    stops a process from starting."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        logger.warning("cannot read %s %s (%s); doing without it", what, path, error)
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        logger.warning("%s %s is damaged (%s); doing without it, it is written anew", what, path, error)
        return None
    if not isinstance(value, dict):
        logger.warning(
            "%s %s holds a JSON %s, not an object; doing without it, it is written anew", what, path, type(value).__name__
        )
        return None
    return value
