"""Importing transformers without its advice that PyTorch was not found (which reads as an error)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def suppress_torch_warning() -> Iterator[None]:
    """Meanwhile, transformers' logger drops the PyTorch advisory (and nothing else)."""
    logger = logging.getLogger("transformers")

    def passes(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyTorch was not found.")

    logger.addFilter(passes)
    try:
        yield
    finally:
        logger.removeFilter(passes)
