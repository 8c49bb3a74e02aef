"""The public surface of `tokbackend`: exactly the names users need, and the names that left it
still resolving, with a DeprecationWarning, for one release (CHANGELOG, "Deprecated")."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import tokbackend

# what a user calls, what those calls take and give, and what they raise
CALLS = ("accelerate", "load", "load_hf", "preload", "ids_as_arrays")
TYPES = ("AccelerationOptions", "GuardSettings", "Stats", "FallbackReason")
ERRORS = ("TokbackendError", "BackendUnavailableError", "FastPathError", "ModelNotFoundError", "ModelFilesError")
SURFACE = {*CALLS, *TYPES, *ERRORS}

# name: where it lives now (the object the deprecated name must still be)
DEPRECATED = {
    "DEFAULT_MODEL": "tokbackend._loading",
    "AcceleratedTokenizerMixin": "tokbackend._tokenizer",
    "AccelerationState": "tokbackend._state",
    "DerivationBudget": "tokbackend._guard",
    "EncodeBackend": "tokbackend.backends",
    "available_backends": "tokbackend.backends",
    "register_backend": "tokbackend.backends",
}


def test_the_surface_is_exactly_the_list():
    assert sorted(tokbackend.__all__) == sorted(SURFACE) and len(tokbackend.__all__) <= 14
    assert not set(tokbackend.__all__) & set(DEPRECATED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no name of the surface warns
        assert all(getattr(tokbackend, name) is not None for name in SURFACE)
    assert tokbackend.__version__ == tokbackend._version.VERSION  # an attribute, outside __all__


def test_a_star_import_brings_the_surface_and_nothing_deprecated():
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec("from tokbackend import *", namespace)
    assert set(namespace) - {"__builtins__"} == SURFACE


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_each_deprecated_name_warns_and_is_the_same_object(name):
    import importlib

    with pytest.warns(DeprecationWarning, match=rf"tokbackend\.{name} is deprecated .*: .+") as caught:
        value = getattr(tokbackend, name)
    assert value is getattr(importlib.import_module(DEPRECATED[name]), name)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with pytest.warns(DeprecationWarning):  # every read warns, not the first alone
        exec(f"from tokbackend import {name}", {})


def test_each_replacement_named_in_a_warning_exists():
    """The public names each warning sends users to."""
    from tokbackend import backends

    assert {"EncodeBackend", "available_backends", "register_backend"} <= set(backends.__all__)
    import dataclasses

    budget = dataclasses.replace(tokbackend.GuardSettings().budget, seconds=1.0)
    with pytest.warns(DeprecationWarning):
        assert isinstance(budget, tokbackend.DerivationBudget)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        tokbackend.no_such_name  # noqa: B018


def test_importing_tokbackend_warns_nothing():
    completed = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", "import tokbackend; tokbackend.preload"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
