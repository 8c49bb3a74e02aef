"""Where tokbackend keeps what it builds: built-in models, derived guard records, auto's choices.
A cache only: one that cannot be written never stops a process from serving."""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

logger = logging.getLogger("tokbackend")

CACHE_DIR_ENV = "TOKBACKEND_CACHE_DIR"
Kept = TypeVar("Kept")
_unwritable: dict[str, OSError] = {}  # the cache directories this process warned about, and why


def cache_dir() -> Path:
    """$TOKBACKEND_CACHE_DIR, else $XDG_CACHE_HOME/tokbackend, else ~/.cache/tokbackend (an empty
    variable, or a relative XDG_CACHE_HOME, counts as unset: never the working directory)."""
    if chosen := os.environ.get(CACHE_DIR_ENV):
        return Path(chosen)
    xdg_cache = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg_cache) if os.path.isabs(xdg_cache) else Path.home() / ".cache") / "tokbackend"


def kept_in_cache(directory: Path, write: Callable[[], Kept]) -> Kept | None:
    """`write()`, which writes under the cache directory `directory`; None where it fails with
    OSError (the directory cannot be made, is read-only or full): the caller serves with what it
    built in memory, and the next process builds it again. The first failure for each directory
    logs one WARNING naming it, the cause and how to keep what is built; later ones log at DEBUG.

    >>> path = kept_in_cache(cache_dir(), lambda: write_record(record, cache_dir() / "guards"))  # doctest: +SKIP
    """
    try:
        return write()
    except OSError as error:
        first = _unwritable.setdefault(str(directory), error) is error  # one atomic step: one thread's error wins
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "cannot write to the cache directory %s (%s: %s); serving on without it: guard records derived here "
            "and auto's choice are kept in memory, built-in models in a temporary directory of this process, "
            "and every new process builds them again. To keep them, set %s to a writable directory, or fill one "
            "at image build time (`tokbackend guard MODEL` with %s set) and serve with it",
            directory,
            type(error).__name__,
            error,
            CACHE_DIR_ENV,
            CACHE_DIR_ENV,
        )
        return None


@functools.cache
def scratch_dir() -> Path:
    """A temporary directory of this process's own, for files an unwritable cache cannot keep."""
    directory, maker = Path(tempfile.mkdtemp(prefix="tokbackend-")), os.getpid()

    def remove() -> None:
        if os.getpid() == maker:  # not at a forked child's exit: the parent may still read it
            shutil.rmtree(directory, ignore_errors=True)

    atexit.register(remove)
    return directory


def read_json_object(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON object `path` holds, or None: no file, or a damaged one (a cache miss, logged
    at WARNING naming the file, `what` it is and the cause)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(value, dict):
            raise ValueError(f"it holds a JSON {type(value).__name__}, not an object")
    except (FileNotFoundError, NotADirectoryError):  # no such file, or a file where a directory should be
        return None
    except (OSError, ValueError) as error:  # unreadable, not UTF-8, not JSON or not an object
        logger.warning("%s %s is damaged or unreadable (%s); doing without it, it is written anew", what, path, error)
        return None
    return value


def write_json_object(path: Path, value: dict[str, Any]) -> None:
    """Write `value` to `path` whole: a temporary file, then a rename."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(value, indent=1), encoding="utf-8")
        temporary.replace(path)
    except BaseException:  # a full disk: no half file left behind to fill it further
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise
