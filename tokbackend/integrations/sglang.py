"""SGLang plugin: `--tokenizer-backend gigatoken` (or `tokbackend-NAME`) on a stock SGLang server.

SGLang (0.5.13 to 0.5.23) runs `register()`, its `sglang.srt.plugins` entry point, in every
process that calls `load_plugins()`. It hooks the flag's choices, `get_tokenizer` and
`get_processor` (HF's tokenizer loaded as usual, then accelerated under the servers' start-up
contract, `integrations._common`: loaded by the scheduler, a TP worker or the detokenizer, which
encode no prompts, it stays HuggingFace's) and the tokenizer manager's ids, and points multi-tokenizer
HTTP workers, which SGLang starts without `load_plugins()`, at `integrations.sglang_app`. Each
hook is registered on its own: one that fails (a release that moved a function) is logged and
leaves the others. No hook reaches SGLANG_RUST_SERVER=1, which tokenizes in Rust (the plugin
warns), nor, before 0.5.23, Granian workers (`--enable-http2`): docs/sglang.md.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tokbackend._routing.names import DEFAULT_FLAG_VALUE, backend_for_flag, flag_values
from tokbackend._tokenizer import ids_as_arrays
from tokbackend.integrations._common import (
    accelerate_for_server,
    log_left_to_hf,
    preload_unless_prompt_free,
    prompt_free_caller,
    warn_if_rust_tokenizes,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger("tokbackend")

# The variable's name before the servers shared one (TOKBACKEND_ALLOW_HF_FALLBACK); still honoured.
LEGACY_ALLOW_FALLBACK_ENV = "TOKBACKEND_SGLANG_ALLOW_HF_FALLBACK"
APP_PATH_ENV = "SGLANG_HTTP_SERVER_APP_PATH"
SGLANG_DEFAULT_APP_PATH = "sglang.srt.entrypoints.http_server:app"
TOKBACKEND_APP_PATH = "tokbackend.integrations.sglang_app:app"
# SGLang's components that receive prompts as ids from the tokenizer manager (0.5.13 to 0.5.23):
# the scheduler (`Scheduler.init_tokenizer`, before its weights load), its TP workers, the
# detokenizer, and the data-parallel controller. Where they load a tokenizer they encode a few
# short strings (a reasoning parser's end tokens, a grammar backend's probe), which HuggingFace
# answers exactly with no build; where they load the plugins (`run_scheduler_process`) nothing is
# preloaded for a build.
PROMPT_FREE_MODULES = (
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tp_worker",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.managers.data_parallel_controller",
)


def register() -> None:
    """Entry point for `sglang.srt.plugins`: flag choices, tokenizer hooks, multi-tokenizer workers;
    the backends' libraries start importing while SGLang does its other start-up work."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    preload_unless_prompt_free(PROMPT_FREE_MODULES)

    hooks = {
        "sglang.srt.server_args.ServerArgs.add_cli_args": _around_add_cli_args,
        "sglang.srt.utils.hf_transformers.tokenizer.get_tokenizer": _around_get_tokenizer,
        "sglang.srt.utils.hf_transformers.processor.get_processor": _around_get_processor,
        "uvicorn.run": _around_uvicorn_run,
        "sglang.srt.managers.tokenizer_manager.TokenizerManager._tokenize_texts": _around_tokenize_texts,
    }
    for target, hook in hooks.items():
        try:
            HookRegistry.register(target, hook, HookType.AROUND)
        except Exception as error:  # one missing target must not take the other hooks with it
            logger.error(
                "tokbackend: could not hook %s (%s); --tokenizer-backend gigatoken may not apply there", target, error
            )
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
    warn_if_rust_tokenizes("SGLANG_RUST_SERVER", "--tokenizer-backend", "has no effect on that path")


def _around_add_cli_args(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Add our values to the choices of `--tokenizer-backend` on the parser SGLang just built: the
    one place every release's choices end up (a literal list, or rebuilt from annotations)."""
    result = original(*args, **kwargs)
    parser = kwargs.get("parser") or next((arg for arg in args if isinstance(arg, argparse.ArgumentParser)), None)
    for action in [] if parser is None else parser._actions:
        if "--tokenizer-backend" in action.option_strings and action.choices is not None:
            action.choices = [*action.choices, *(value for value in flag_values() if value not in action.choices)]
    return result


def _around_uvicorn_run(original: Callable[..., Any], app: Any, *args: Any, **kwargs: Any) -> Any:
    """Multi-worker uvicorn loads SGLang's app by import path in fresh processes: give it ours,
    which loads the plugins first (SGLang before 0.5.23 passes its path as a literal)."""
    if app == SGLANG_DEFAULT_APP_PATH and (kwargs.get("workers") or 1) > 1:
        app = TOKBACKEND_APP_PATH
    return original(app, *args, **kwargs)


async def _around_tokenize_texts(original: Callable[..., Any], manager: Any, *args: Any, **kwargs: Any) -> Any:
    """The tokenizer manager's one tokenizer call for text prompts. What it returns goes through
    `_validate_one_request` (len, `del ids[n:]`) to `_create_tokenized_object`, which makes
    `array("q", ids)` of it for the scheduler (every release from 0.5.13 to 0.5.23): ids that are
    such arrays already, straight from the backend's buffer, skip the Python ints in between.
    Not for multimodal models, whose processor may read the ids first; chat, which encodes
    elsewhere, and anything HuggingFace answers keep lists."""
    if getattr(manager, "mm_processor", None) is not None:
        return await original(manager, *args, **kwargs)
    with ids_as_arrays():
        return await original(manager, *args, **kwargs)


def _around_get_tokenizer(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """With one of our flag values: HuggingFace's tokenizer, loaded as SGLang loads it, accelerated."""
    return _accelerated_load(original, args, kwargs, processor=False)


def _around_get_processor(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """With one of our flag values: HuggingFace's processor with its tokenizer accelerated."""
    return _accelerated_load(original, args, kwargs, processor=True)


def _accelerated_load(
    original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], processor: bool
) -> Any:
    flag = kwargs.get("tokenizer_backend", "")
    if backend_for_flag(flag) is None:
        return original(*args, **kwargs)
    kwargs["tokenizer_backend"] = "huggingface"
    loaded = original(*args, **kwargs)
    model = str(args[0] if args else kwargs.get("tokenizer_name", "?"))
    caller = prompt_free_caller(PROMPT_FREE_MODULES)
    if caller is not None:
        log_left_to_hf("SGLang", model, caller)
        return loaded
    if processor and hasattr(loaded, "tokenizer"):
        loaded.tokenizer = accelerate_for_sglang(loaded.tokenizer, model, flag)
        return loaded
    return accelerate_for_sglang(loaded, model, flag)


def accelerate_for_sglang(
    tokenizer: PreTrainedTokenizerBase, model: str, backend_flag: str = DEFAULT_FLAG_VALUE
) -> PreTrainedTokenizerBase:
    """`tokbackend.accelerate()` under the servers' start-up contract (`integrations._common`)."""
    return accelerate_for_server(
        tokenizer, model, f"--tokenizer-backend {backend_flag}", "SGLang", LEGACY_ALLOW_FALLBACK_ENV
    )


__all__ = ["accelerate_for_sglang", "register"]
