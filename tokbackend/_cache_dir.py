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
    """$TOKBACKEND_CACHE_DIR, else $XDG_CACHE_HOME/tokbackend, else ~/.cache/tokbackend.

    An empty variable counts as unset, and so does a relative XDG_CACHE_HOME (the XDG base
    directory spec says to ignore one): the cache never lands in the working directory, where a
    `tokbackend` folder would shadow the package for a Python started there."""
    if chosen := os.environ.get(CACHE_DIR_ENV):
        return Path(chosen)
    xdg_cache = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg_cache) if os.path.isabs(xdg_cache) else Path.home() / ".cache") / "tokbackend"


def read_json_object(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON object `path` holds, or None where there is none to use: no file, or one damaged
    (cut short, not JSON) or of the wrong shape. A kept file is a cache: a damaged one is a miss,
    logged at WARNING naming the file, `what` it is and the cause, and written anew by whoever
    reads it; it never stops a process from starting."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(value, dict):
            raise ValueError(f"it holds a JSON {type(value).__name__}, not an object")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # unreadable, not UTF-8, not JSON or not an object
        logger.warning("%s %s is damaged or unreadable (%s); doing without it, it is written anew", what, path, error)
        return None
    return value


def write_json_object(path: Path, value: dict[str, Any]) -> None:
    """Write `value` to `path` whole: through a temporary file of this process, then a rename, so
    readers in other processes never see half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(value, indent=1), encoding="utf-8")
    temporary.replace(path)
