"""Importing transformers without its advice that PyTorch was not found.

transformers logs "PyTorch was not found. Models won't be available ..." when it is imported
without torch, which a plain tokbackend install never has and tokenizers never need: it reads
as an error to a user who ran `import tokbackend`. Every other message of transformers' passes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

TORCH_ADVISORY = "PyTorch was not found."


@contextlib.contextmanager
def without_the_torch_advisory() -> Iterator[None]:
    """Meanwhile, transformers' logger drops the PyTorch advisory (and nothing else)."""
    logger = logging.getLogger("transformers")

    def passes(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TORCH_ADVISORY)

    logger.addFilter(passes)
    try:
        yield
    finally:
        logger.removeFilter(passes)
