"""The cache directory is a cache: where it is, and that one which cannot be written (missing and
not creatable, read-only, full) never stops a process from serving."""

from __future__ import annotations

import pytest

from tokbackend._cache_dir import cache_dir
from tokbackend._routing import choices


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
