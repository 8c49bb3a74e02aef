"""tokbackend's version: the one place it is written. pyproject.toml reads it from here
(`[tool.setuptools.dynamic]`), the package exports it as `__version__`, `tokbackend --version`
prints it, and what tokbackend remembers on disk is keyed by it."""

VERSION = "0.1.0"
