"""Importing transformers without its advice that PyTorch was not found.

A plain tokbackend install has no torch and tokenizers never need it, yet transformers logs
"PyTorch was not found. ..." on import, which reads as an error; every other message passes.
"""

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
