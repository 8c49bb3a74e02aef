"""The base of every exception tokbackend raises on purpose.

`except tokbackend.TokbackendError` catches them all; each also keeps the builtin base callers
already catch (a missing model is an `OSError`, a damaged file a `ValueError`, a backend that
cannot serve a `RuntimeError`). docs/errors.md lists each: when it is raised, what to do.
Arguments of the wrong type or value raise Python's own `TypeError` and `ValueError`, as the
standard library does.
"""

from __future__ import annotations


class TokbackendError(Exception):
    """Raised on purpose by tokbackend (a subclass says what happened)."""


__all__ = ["TokbackendError"]
