"""vLLM plugin: `--tokenizer-mode gigatoken` (or `tokbackend-NAME`) on a stock vLLM server.

Registered under vLLM's entry-point group `vllm.general_plugins`, which vLLM loads in every
process it starts. `register()` adds, for each of our flag values, a tokenizer mode (vLLM's own
HF loading, `CachedHfTokenizer`, then `tokbackend.accelerate()` under the servers' start-up
contract, `tokbackend.integrations._common`: loaded by the engine core's structured-output
manager, which encodes no prompts, it stays HuggingFace's) and the HF renderer for that mode. vLLM accepts any
string as a mode, so a near-miss (`gigatokn`) fails at load with the modes we register. vLLM's
own `VLLM_USE_FASTOKENS` (fastokens' process-global patch) is not `tokbackend-fastokens`: do
not combine them. With `VLLM_USE_RUST_FRONTEND=1` (0.33 and 0.34) `vllm serve` starts vLLM's Rust
frontend (`vllm-rs frontend`) as its API server, which renders and tokenizes requests in Rust,
where no hook applies, and refuses our modes at start-up ("unknown renderer"): the plugin warns.
"""

from __future__ import annotations

import difflib
import functools
import os
from typing import TYPE_CHECKING, Any

from tokbackend._routing.names import flag_values
from tokbackend.integrations._common import (
    accelerate_for_server,
    log_left_to_hf,
    preload_unless_prompt_free,
    prompt_free_caller,
    warn_if_rust_tokenizes,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

RENDERER = ("vllm.renderers.hf", "HfRenderer")
_CLASS_PREFIX = "TokbackendTokenizer_"
# vLLM's components that encode no prompts (0.33, 0.34): the engine core, which loads the plugins
# in its own process, and its structured-output manager, which loads a tokenizer there (grammar
# compilers, reasoning end tokens), and the workers. Prompts are encoded in the API process (the
# renderer), whose detokenizer shares the renderer's tokenizer.
PROMPT_FREE_MODULES = ("vllm.v1.structured_output", "vllm.v1.engine.core", "vllm.v1.worker")


def register() -> None:
    """Entry point for `vllm.general_plugins`: a tokenizer mode and its renderer per flag value;
    the backends' libraries start importing while vLLM does its other start-up work."""
    from vllm.renderers.registry import RENDERER_REGISTRY
    from vllm.tokenizers.registry import TokenizerRegistry

    preload_unless_prompt_free(PROMPT_FREE_MODULES)

    for mode in flag_values():
        if TokenizerRegistry.tokenizers.get(mode) != (__name__, class_name(mode)):
            TokenizerRegistry.register(mode, __name__, class_name(mode))
        if mode not in RENDERER_REGISTRY.renderers:
            RENDERER_REGISTRY.register(mode, *RENDERER)
    _explain_near_misses(TokenizerRegistry)
    warn_if_rust_tokenizes(
        "VLLM_USE_RUST_FRONTEND",
        "--tokenizer-mode",
        "cannot apply: the API server is then vLLM's Rust frontend (vllm-rs), which refuses those modes at "
        'start-up ("unknown renderer"); unset VLLM_USE_RUST_FRONTEND to serve with tokbackend',
    )


def class_name(mode: str) -> str:
    """The attribute of this module vLLM resolves for `mode` (see `__getattr__`)."""
    return _CLASS_PREFIX + mode.replace("-", "_")


def __getattr__(name: str) -> type:
    # vLLM resolves "tokbackend.integrations.vllm.<class name>" in each process; the classes
    # are made on demand, one per flag value, so a backend registered later gets one too.
    if name.startswith(_CLASS_PREFIX):
        for mode in flag_values():
            if class_name(mode) == name:
                return _tokenizer_class(mode)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _tokenizer_class(mode: str) -> type:
    class TokbackendTokenizer:
        """What `--tokenizer-mode {mode}` loads: vLLM's HF tokenizer, accelerated."""

        @classmethod
        def from_pretrained(
            cls, path_or_repo_id: str | os.PathLike[str], *args: Any, **kwargs: Any
        ) -> PreTrainedTokenizerBase:
            from vllm.tokenizers.hf import CachedHfTokenizer

            tokenizer: PreTrainedTokenizerBase = CachedHfTokenizer.from_pretrained(path_or_repo_id, *args, **kwargs)
            caller = prompt_free_caller(PROMPT_FREE_MODULES)
            if caller is not None:
                log_left_to_hf("vLLM", str(path_or_repo_id), caller)
                return tokenizer
            return accelerate_for_server(tokenizer, str(path_or_repo_id), f"--tokenizer-mode {mode}", "vLLM")

    TokbackendTokenizer.__name__ = TokbackendTokenizer.__qualname__ = class_name(mode)
    return TokbackendTokenizer


def _explain_near_misses(registry: Any) -> None:
    """Make `--tokenizer-mode gigatokn` fail with the modes tokbackend adds, not only vLLM's
    "No tokenizer registered" (vLLM's parser accepts any string)."""
    if getattr(registry.load_tokenizer_cls, "_tokbackend", False):
        return
    original = registry.load_tokenizer_cls

    def load_tokenizer_cls(tokenizer_mode: str) -> Any:
        try:
            return original(tokenizer_mode)
        except ValueError as error:
            close = difflib.get_close_matches(tokenizer_mode, flag_values(), n=3, cutoff=0.6)
            if not close:
                raise
            raise ValueError(
                f"{error} Did you mean {' or '.join(repr(mode) for mode in close)}? tokbackend registers "
                f"--tokenizer-mode {', '.join(flag_values())}."
            ) from error

    load_tokenizer_cls.__dict__["_tokbackend"] = True
    registry.load_tokenizer_cls = load_tokenizer_cls


__all__ = ["class_name", "register"]
