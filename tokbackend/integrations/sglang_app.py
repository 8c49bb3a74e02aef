"""The HTTP app for SGLang's multi-tokenizer workers, with SGLang's plugins loaded first.

SGLang starts `--tokenizer-worker-num > 1` workers by app path without calling
`load_plugins()` in them; the tokbackend plugin points that path here so the workers'
tokenizers are accelerated like every other process's.
"""

from sglang.srt.plugins import load_plugins

load_plugins()

from sglang.srt.entrypoints.http_server import app  # noqa: E402

__all__ = ["app"]
