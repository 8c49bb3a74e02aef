"""tokbackend's version (read by the package and by what it remembers on disk)."""

VERSION = "0.1.0"
