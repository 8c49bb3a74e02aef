"""The base of every exception tokbackend raises on purpose.

`except tokbackend.TokbackendError` catches them all; each also keeps the builtin base callers
already catch (`OSError`, `ValueError`, `RuntimeError`). docs/errors.md lists each.
"""

from __future__ import annotations


class TokbackendError(Exception):
    """Raised on purpose by tokbackend (a subclass says what happened)."""


__all__ = ["TokbackendError"]
