"""The cache directory is a cache: where it is, and that one which cannot be written (missing and
not creatable, read-only, full) never stops a process from serving."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import tokbackend
from tokbackend._cache_dir import cache_dir
from tokbackend._guard import GuardSettings
from tokbackend._guard.records import BAKED_RECORDS_ENV
from tokbackend._models import builtin_name_of
from tokbackend._routing import choices
from tokbackend.equivalence.families import build_family, family_dir

HELPERS = Path(__file__).parent / "helpers"
LETTER_X = 0x323B0  # CJK Extension J (Unicode 17): a letter to gigatoken, unassigned to HF tokenizers
GUARDED = f"The letter {chr(LETTER_X)}'s ids are HF's"


@pytest.mark.parametrize("xdg_cache_home", ["", "relative/cache"])
def test_an_empty_or_relative_xdg_cache_home_counts_as_unset(xdg_cache_home, monkeypatch, tmp_path):
    """The XDG spec: empty means unset, a relative path is ignored. Before, XDG_CACHE_HOME=""
    put the cache in ./tokbackend, a folder that shadows the package for a Python started there."""
    working = tmp_path / "working"
    working.mkdir()
    monkeypatch.chdir(working)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", xdg_cache_home)
    for unset in ("", None):  # an empty TOKBACKEND_CACHE_DIR counts as unset too
        if unset is None:
            monkeypatch.delenv("TOKBACKEND_CACHE_DIR")
        else:
            monkeypatch.setenv("TOKBACKEND_CACHE_DIR", unset)
        assert cache_dir() == tmp_path / "home" / ".cache" / "tokbackend"
    choices.remember("some-model", "gigatoken")
    assert choices.choices_file().is_file() and choices.choices_file().is_relative_to(tmp_path / "home")
    assert list(working.iterdir()) == []


# A narrowed derivation (a few blocks that hold known divergences) with no shipped record applying:
# the guard of a pipeline no record covers, derived where it is served.
def _narrowed(tmp_path: Path) -> GuardSettings:
    return GuardSettings(
        code_points=(*range(0x323B0, 0x32400), *range(0x1AC0, 0x1B00)), shipped_records=tmp_path / "none"
    )


def _cache_warnings(caplog) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "cannot write to the cache directory" in record.getMessage()
    ]


def test_a_cache_directory_that_cannot_be_made_still_serves_with_the_guard_derived_in_memory(
    monkeypatch, tmp_path, caplog
):
    """TOKBACKEND_CACHE_DIR under a regular file (NotADirectoryError, as a read-only file system
    gives EROFS; chmod stops no root), a pipeline no record covers: the guard is derived and
    served from memory, with one WARNING for the directory that says how to keep it. Before, the
    lane failed (BackendUnavailableError: building its lane failed: NotADirectoryError)."""
    hf = build_family("llama3", "small")  # built in the real cache first
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(unwritable))
    monkeypatch.delenv(BAKED_RECORDS_ENV, raising=False)
    with caplog.at_level(logging.DEBUG, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, "gigatoken", guard=_narrowed(tmp_path), strict=True)
    stats = fast.tokbackend.stats()
    assert stats["start_up"]["phase"] == "final" and stats["backend"] == "gigatoken", stats
    assert stats["guard_record"] is None and "kept in memory only" in stats["guard"], stats["guard"]
    assert LETTER_X in fast.tokbackend.guard.code_points  # and it is used: that text goes to HF
    assert fast.encode(GUARDED) == hf.encode(GUARDED)
    assert fast.tokbackend.stats()["fallbacks"].get("unicode_guard") == 1
    [warning] = _cache_warnings(caplog)  # the lock and the record both failed: one WARNING
    assert str(unwritable) in warning and "NotADirectoryError" in warning
    assert "TOKBACKEND_CACHE_DIR" in warning and "tokbackend guard" in warning


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_full_cache_directory_still_serves_and_is_left_without_half_files(tmp_path):
    """A cache on a disk that takes no byte (RLIMIT_FSIZE 0 in a child: EFBIG where a full disk
    gives ENOSPC, after the directory and the file were made): auto serves exactly, with one
    WARNING, and no record, temporary file or half-written model folder is left behind. Before,
    accelerate() raised."""
    model = family_dir("llama3", "small")  # built in the real cache first
    child = subprocess.run(
        [sys.executable, str(HELPERS / "serve_on_a_full_disk.py"), str(tmp_path / "cache"), str(model)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    served = json.loads(child.stdout.strip().splitlines()[-1])
    assert served["phase"] == "final" and served["backend"] != "hf" and served["exact"], served
    assert "kept in memory only" in served["guard"], served
    assert "File too large" in served["model_error"], served
    warnings = [message for message in served["warnings"] if "cannot write to the cache directory" in message]
    assert len(warnings) == 1 and str(tmp_path / "cache") in warnings[0] and "File too large" in warnings[0], served
    assert [path.name for path in (tmp_path / "cache").rglob("*") if path.is_file() and path.stat().st_size] == []
    assert not [path for path in (tmp_path / "cache").rglob("*") if path.suffix in (".json", ".tmp")]


def test_a_builtin_model_is_built_in_a_directory_of_the_process_where_the_cache_cannot_be_written(
    monkeypatch, tmp_path, caplog
):
    """A built-in model (its build planted small here) is written into the process's own temporary
    directory, once, with the cache directory's WARNING. Before, load("qwen3.6") raised the OSError."""
    from tokbackend._models import qwen

    builds = []
    monkeypatch.setattr(qwen, "build_tokenizer_json", lambda spec: builds.append(spec.name) or {"added_tokens": []})
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(unwritable))
    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        first, again = (tokbackend._loading.resolve_model("qwen3") for _ in range(2))
    from tokbackend._cache_dir import scratch_dir  # imported here: a test that fails on the old code names its cause

    assert first == again and Path(first).parent == scratch_dir() and builds == ["qwen3"]
    assert {path.name for path in Path(first).iterdir()} == {"tokenizer.json", "tokenizer_config.json"}
    assert builtin_name_of(first) == "qwen3"  # still named for its model in stats and logs
    [warning] = _cache_warnings(caplog)
    assert str(unwritable) in warning
