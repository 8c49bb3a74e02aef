"""tokbackend's version, the one place it is written (pyproject.toml, `__version__`,
`tokbackend --version` and what tokbackend keeps on disk all read it from here)."""

VERSION = "0.2.0"
