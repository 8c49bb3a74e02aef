"""SGLang plugin: `--tokenizer-backend gigatoken` (or `tokbackend-NAME`) on a stock SGLang server.

Registered under SGLang's entry-point group `sglang.srt.plugins`, so SGLang runs `register()`
through `load_plugins()` in every process that calls it (the launcher, `sgl.Engine`, the
scheduler, the detokenizer, the data-parallel controller). `register()`:

- adds "gigatoken", "tokbackend-auto" and "tokbackend-NAME" for every registered backend to the
  choices of `--tokenizer-backend` (SGLang's own "fastokens", its global patch, is left alone);
- wraps `get_tokenizer` and `get_processor` (SGLang's hook registry patches every module that
  imported them): with one of those values they load the HuggingFace tokenizer as
  usual and return `tokbackend.accelerate()` of it, logging one line per process;
- points the HTTP app path of multi-tokenizer workers (`--tokenizer-worker-num > 1`), which
  SGLang starts without calling `load_plugins()`, at `tokbackend.integrations.sglang_app`,
  which calls it before loading SGLang's app.

A model the fast path cannot serve fails at start-up with the reason; set
TOKBACKEND_ALLOW_HF_FALLBACK=1 to serve it with HuggingFace instead (logged; see
`tokbackend.integrations.common`). With
SGLANG_RUST_SERVER=1 SGLang tokenizes in Rust, where no Python hook applies: the plugin warns.
"""

from __future__ import annotations

import logging
import os
import typing

from tokbackend.integrations.common import DEFAULT_FLAG_VALUE, accelerate_for_server, backend_for_flag, flag_values

logger = logging.getLogger("tokbackend")

# The variable's name before the servers shared one (TOKBACKEND_ALLOW_HF_FALLBACK); still honoured.
LEGACY_ALLOW_FALLBACK_ENV = "TOKBACKEND_SGLANG_ALLOW_HF_FALLBACK"
APP_PATH_ENV = "SGLANG_HTTP_SERVER_APP_PATH"
SGLANG_DEFAULT_APP_PATH = "sglang.srt.entrypoints.http_server:app"
TOKBACKEND_APP_PATH = "tokbackend.integrations.sglang_app:app"
TARGETS = {
    "get_tokenizer": "sglang.srt.utils.hf_transformers.tokenizer.get_tokenizer",
    "get_processor": "sglang.srt.utils.hf_transformers.processor.get_processor",
}


def register() -> None:
    """Entry point for `sglang.srt.plugins`: flag choice, hooks, multi-tokenizer workers."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    _add_flag_choice()
    HookRegistry.register(TARGETS["get_tokenizer"], _around_get_tokenizer, HookType.AROUND)
    HookRegistry.register(TARGETS["get_processor"], _around_get_processor, HookType.AROUND)
    app_path = os.environ.get(APP_PATH_ENV)
    if app_path in (None, SGLANG_DEFAULT_APP_PATH):
        os.environ[APP_PATH_ENV] = TOKBACKEND_APP_PATH
    elif app_path != TOKBACKEND_APP_PATH:
        logger.warning(
            "%s=%s is set; multi-tokenizer HTTP workers must call sglang.srt.plugins.load_plugins() "
            "themselves for --tokenizer-backend gigatoken to reach them",
            APP_PATH_ENV,
            app_path,
        )
    if os.environ.get("SGLANG_RUST_SERVER") == "1":
        logger.warning(
            "SGLANG_RUST_SERVER=1 tokenizes in Rust, where Python hooks do not apply; "
            "--tokenizer-backend gigatoken has no effect on that path"
        )


def _add_flag_choice() -> None:
    from sglang.srt.server_args import ServerArgs

    metadata = typing.get_type_hints(ServerArgs, include_extras=True)["tokenizer_backend"].__metadata__
    choices = metadata[0].choices
    choices.extend(value for value in flag_values() if value not in choices)


def _around_get_tokenizer(original, *args, **kwargs):
    flag = kwargs.get("tokenizer_backend")
    if backend_for_flag(flag) is None:
        return original(*args, **kwargs)
    kwargs["tokenizer_backend"] = "huggingface"
    tokenizer = original(*args, **kwargs)
    model = args[0] if args else kwargs.get("tokenizer_name", "?")
    return accelerate_for_sglang(tokenizer, str(model), flag)


def _around_get_processor(original, *args, **kwargs):
    flag = kwargs.get("tokenizer_backend")
    if backend_for_flag(flag) is None:
        return original(*args, **kwargs)
    kwargs["tokenizer_backend"] = "huggingface"
    processor = original(*args, **kwargs)
    model = str(args[0] if args else kwargs.get("tokenizer_name", "?"))
    if hasattr(processor, "tokenizer"):
        processor.tokenizer = accelerate_for_sglang(processor.tokenizer, model, flag)
        return processor
    return accelerate_for_sglang(processor, model, flag)


def accelerate_for_sglang(tokenizer, model: str, backend_flag: str = DEFAULT_FLAG_VALUE):
    """`tokbackend.accelerate()` under the servers' start-up contract (`integrations.common`)."""
    return accelerate_for_server(tokenizer, model, f"--tokenizer-backend {backend_flag}", "SGLang", LEGACY_ALLOW_FALLBACK_ENV)
