"""`auto`'s choices, remembered on disk per model, library versions and candidates, in one file
shared by this user's processes; each choice names the process that wrote it (`described`)."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from tokbackend import _version as version
from tokbackend._cache_dir import cache_dir, kept_in_cache, read_json_object, write_json_object
from tokbackend._guard import guard_versions, model_fingerprint


def choice_key(tokenizer_json: str, candidates: list[str], libraries: tuple[str, ...]) -> str:
    """What a remembered choice is valid for."""
    identity = {
        "tokbackend": version.VERSION,  # its probe and guard records decide what qualifies
        "model": model_fingerprint(tokenizer_json),
        "versions": guard_versions(tuple(sorted(set(libraries)))),
        "candidates": candidates,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:24]


def remembered(key: str) -> str | None:
    """The backend chosen for `key` before, if any."""
    choice = _read().get(key)
    return choice.get("backend") if isinstance(choice, dict) else None


def remember(key: str, backend: str) -> None:
    """Keep `backend` as the choice for `key`, with who chose it (process, environment, time)."""
    chosen_by = {
        "pid": os.getpid(),
        "python": sys.prefix,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    choices, path = {**_read(), key: {"backend": backend, "chosen_by": chosen_by}}, choices_file()

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_object(path, choices)

    kept_in_cache(cache_dir(), write)  # where it cannot, the next process chooses again


def choices_file() -> Path:
    """The file the choices are kept in (every process of this user shares it)."""
    return cache_dir() / "auto" / "choices.json"


def described(key: str) -> str:
    """What a remembered choice is, for a routing reason, and how to have auto choose afresh."""
    choice = _read().get(key)
    chosen_by = choice.get("chosen_by") if isinstance(choice, dict) else None
    writer = "an earlier process"
    if isinstance(chosen_by, dict):
        writer = f"process {chosen_by.get('pid')} of {chosen_by.get('python')} at {chosen_by.get('at')}"
    return (
        f"auto's choice for this model and these library versions, made by {writer} and kept in {choices_file()} "
        "(shared by this user's processes; delete that file to choose afresh)"
    )


def _read() -> dict[str, Any]:
    return read_json_object(choices_file(), "auto's choices file") or {}
