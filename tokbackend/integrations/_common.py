"""The start-up contract every server integration shares (SGLang, vLLM): the flag values
("gigatoken", "tokbackend-NAME"; the prefix keeps them apart from the servers' own "fastokens",
fastokens' process-global patch); the final build made before `get_tokenizer` returns, with one
log line per process; no build where the server's code that loads the tokenizer encodes no
prompts with it (SGLang's scheduler, TP workers and detokenizer, vLLM's engine core: they keep
HuggingFace's tokenizer for their few short encodes, exact by construction); a later load of
the same tokenizer in a process sharing the first one's build; and no silent downgrade: a model
the fast path cannot serve stops the server, unless TOKBACKEND_ALLOW_HF_FALLBACK=1 asks to serve
it with HuggingFace."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
import weakref
from collections.abc import Collection
from types import FrameType
from typing import TYPE_CHECKING

from tokbackend._options import AccelerationOptions
from tokbackend._routing.names import DEFAULT_FLAG_VALUE, FLAG_PREFIX, backend_for_flag

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger("tokbackend")

ALLOW_FALLBACK_ENV = "TOKBACKEND_ALLOW_HF_FALLBACK"
# Tokenizers this process accelerated for a server, newest last, held weakly: what a later load
# of the same tokenizer shares its build with. Process-wide because the server's loads are
# separate calls into its own code; a tuple replaced in one assignment, so a reader never sees it
# half-changed (two loads finishing at once may keep one: a later load then builds, never wrongly).
_built: tuple[weakref.ref[PreTrainedTokenizerBase], ...] = ()


def warn_if_rust_tokenizes(variable: str, flag_option: str, consequence: str) -> None:
    """Log a WARNING where `variable` is on (SGLang's `SGLANG_RUST_SERVER`, vLLM's
    `VLLM_USE_RUST_FRONTEND`: values as either server reads them): the server then tokenizes
    requests in Rust, where no Python hook of ours applies; `consequence` says what becomes of
    `flag_option` with our values."""
    value = os.environ.get(variable, "")
    if value.strip().lower() not in ("", "0", "false", "no", "n"):
        logger.warning(
            "%s=%s: the server tokenizes requests in Rust, where Python hooks do not apply; %s %s (or %s*) %s",
            variable,
            value,
            flag_option,
            DEFAULT_FLAG_VALUE,
            FLAG_PREFIX,
            consequence,
        )


def prompt_free_caller(modules: Collection[str]) -> str | None:
    """The nearest of `modules` (or a submodule of one) among the callers on this thread's stack,
    or None: which of the server's components is loading the tokenizer, read from the code that
    calls, not guessed. `modules` are those that encode no prompts with what they load."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and any(name == module or name.startswith(module + ".") for module in modules):
            return name
        frame = frame.f_back
    return None


def preload_unless_prompt_free(modules: Collection[str]) -> None:
    """`tokbackend.preload()`, unless one of `modules` (see `prompt_free_caller`) is loading the
    plugins: a process such a component starts never builds, so it imports nothing for a build."""
    import tokbackend

    if prompt_free_caller(modules) is None:
        tokbackend.preload()


def log_left_to_hf(server: str, model: str, caller: str) -> None:
    """The log line of a process that keeps HuggingFace's tokenizer (see `prompt_free_caller`)."""
    process = f"{multiprocessing.current_process().name} (pid {os.getpid()})"
    logger.warning(
        "%s %s tokenizer for %s: backend hf, not accelerated (loaded by %s, which encodes no prompts; "
        "the process that encodes them builds the fast path)",
        server,
        process,
        model,
        caller,
    )


def accelerate_for_server(
    tokenizer: PreTrainedTokenizerBase,
    model: str,
    flag: str,
    server: str,
    *legacy_fallback_variables: str,
    options: AccelerationOptions | None = None,
) -> PreTrainedTokenizerBase:
    """`tokbackend.accelerate()` under the contract above. `flag` is the command-line value
    ("--tokenizer-backend gigatoken"), named in errors and the log line; `options`: what the flag
    and the environment leave as they are (default `AccelerationOptions()`)."""
    global _built  # a build that start-up accepted is shared (appended below)
    import tokbackend
    from tokbackend._tokenizer import accelerate_like

    backend = backend_for_flag(flag.split()[-1])
    variables = (ALLOW_FALLBACK_ENV, *legacy_fallback_variables)
    allow_fallback = any(os.environ.get(name, "") not in ("", "0", "false", "False") for name in variables)
    process = f"{multiprocessing.current_process().name} (pid {os.getpid()})"
    started = time.monotonic()
    options = (options or AccelerationOptions()).replace(allow_hf_fallback=allow_fallback)
    options = options if backend is None else options.replace(backend=backend)

    def log_served(how: str, served: PreTrainedTokenizerBase) -> None:
        seconds, described = time.monotonic() - started, served.tokbackend.describe()
        logger.warning("%s %s tokenizer for %s (%s in %.1f s): %s", server, process, model, how, seconds, described)

    def refused(why: str) -> RuntimeError:
        return RuntimeError(
            f"tokbackend: {flag} cannot serve {model} in {server} process {process}: {why}. "
            f"Remove the flag, or set {ALLOW_FALLBACK_ENV}=1 to serve it with HuggingFace."
        )

    # the build of a tokenizer accelerated earlier with these options, where the two encode alike
    for earlier in [entry() for entry in reversed(_built)]:
        shared = (
            None if earlier is None or earlier.tokbackend.options != options else accelerate_like(tokenizer, earlier)
        )
        if shared is not None:
            log_served("the build of an earlier load in this process, shared", shared)
            return shared

    try:
        accelerated: PreTrainedTokenizerBase = tokbackend.accelerate(tokenizer, options=options)
    except (tokbackend.BackendUnavailableError, tokbackend.FastPathError, TypeError) as error:
        raise refused(str(error)) from error
    except Exception as error:  # an error of ours (a missing package-data file, say): say so, stop
        reason = f"building the fast path failed: {type(error).__name__}: {error}"
        if not allow_fallback:
            raise refused(reason) from error
        logger.error(
            "%s %s tokenizer for %s: %s; serving it with HuggingFace (%s=1)",
            server,
            process,
            model,
            reason,
            ALLOW_FALLBACK_ENV,
        )
        return tokenizer
    log_served("built", accelerated)
    if not accelerated.tokbackend.fast_path_enabled and not allow_fallback:
        raise refused(f"the fast path is off ({accelerated.tokbackend.disabled_reason})")
    _built = (*(entry for entry in _built if entry() is not None), weakref.ref(accelerated))
    return accelerated
