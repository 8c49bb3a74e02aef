"""SGLang's HTTP app with its plugins loaded first: the app path the tokbackend plugin gives
multi-tokenizer workers, which SGLang starts without calling `load_plugins()`."""

from sglang.srt.plugins import load_plugins

load_plugins()

from sglang.srt.entrypoints.http_server import app  # noqa: E402

__all__ = ["app"]
