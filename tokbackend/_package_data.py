"""Data files inside the installed packages, found through `importlib.resources`.

Every file the runtime reads from a package is found by `package_path(package, name)`:
`tests/test_packaging.py` reads every call to it to check the wheel holds each file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tokbackend._errors import TokbackendError


class MissingPackageDataError(TokbackendError, FileNotFoundError):
    """A data file the package needs is not installed (a wheel built without it)."""


def package_path(package: str, name: str) -> Path:
    """The file or folder `name` inside the installed `package`, as a filesystem path.

    >>> package_path("tokbackend._guard", "unicode_history.json").name
    'unicode_history.json'
    """
    resource = resources.files(package).joinpath(name)
    if not isinstance(resource, Path):
        # a package imported from a zip archive: its files have no path for glob() and open()
        raise MissingPackageDataError(
            f"tokbackend: {package} is not installed as files ({resource!r}); install it with pip"
        )
    return resource


def read_text(package: str, name: str) -> str:
    """The text of data file `name` of `package`; a missing one is named with how to fix it."""
    path = package_path(package, name)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise MissingPackageDataError(
            f"tokbackend: {name} is missing from the installed package {package} ({path}): the wheel was built without "
            "its package data; reinstall tokbackend from a release wheel (pip install --force-reinstall tokbackend)"
        ) from error
