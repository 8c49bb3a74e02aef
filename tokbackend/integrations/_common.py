"""The start-up contract every server integration shares (SGLang, vLLM).

- Flag values: "gigatoken" (the name users know) means the gigatoken backend; "tokbackend-NAME"
  means any registered backend NAME, or "tokbackend-auto". The prefix keeps our values apart
  from the servers' own choices (SGLang's and vLLM's "fastokens" are fastokens' process-global
  patch, not this package).
- A server process serves with the final build, made before `get_tokenizer` returns (as every
  `accelerate()` does: the exact guard of a pipeline without a record and auto's choice
  included). One log line per process says what serves the tokenizer, and how long the build
  took.
- One build per process and tokenizer: a process that loads the same tokenizer again (SGLang's
  scheduler loads one for itself and one for its model worker) serves the second with the first
  one's build, as a copy would (`tokbackend._tokenizer.accelerate_like`), rather than building it
  again on the way to /health (4.5-5.1 s each for Qwen3.6 on the H200 host).
- No silent downgrade: a model the fast path cannot serve, or an error while building it, stops
  the server with the reason, unless the environment variable TOKBACKEND_ALLOW_HF_FALLBACK=1
  asks to serve it with HF.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
import weakref
from typing import TYPE_CHECKING

from tokbackend._options import AccelerationOptions
from tokbackend.backends import BARE_FLAG_BACKENDS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger("tokbackend")

ALLOW_FALLBACK_ENV = "TOKBACKEND_ALLOW_HF_FALLBACK"
FLAG_PREFIX = "tokbackend-"
# The value a server flag defaults to in our own helpers (`accelerate_for_sglang`).
DEFAULT_FLAG_VALUE = BARE_FLAG_BACKENDS[0]
# Tokenizers this process accelerated for a server, newest last (held weakly), which a later load
# of the same tokenizer shares its build with (`accelerate_for_server`). A tuple replaced in one
# assignment, so a reader never sees it half-changed; two loads finishing at once may keep only
# one of the two, which costs a later load a build of its own, never a wrong one.
_built: tuple[weakref.ref[PreTrainedTokenizerBase], ...] = ()


def flag_values() -> list[str]:
    """Every value a server flag accepts for tokbackend: "gigatoken", "tokbackend-auto", ..."""
    from tokbackend._routing import backend_choices

    return [*BARE_FLAG_BACKENDS, *(FLAG_PREFIX + name for name in backend_choices())]


def backend_for_flag(value: object) -> str | None:
    """The tokbackend backend a flag value selects, or None when the value is not ours."""
    if not isinstance(value, str):
        return None
    if value in BARE_FLAG_BACKENDS:
        return value
    if value.startswith(FLAG_PREFIX) and value in flag_values():
        return value.removeprefix(FLAG_PREFIX)
    return None


def fallback_allowed(*legacy_variables: str) -> bool:
    """Whether the operator asked to serve with HF when the fast path cannot."""
    return any(os.environ.get(name, "") not in ("", "0", "false", "False") for name in (ALLOW_FALLBACK_ENV, *legacy_variables))


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
    import tokbackend

    backend = backend_for_flag(flag.split()[-1])
    allow_fallback = fallback_allowed(*legacy_fallback_variables)
    process = f"{multiprocessing.current_process().name} (pid {os.getpid()})"
    started = time.monotonic()
    options = (options or AccelerationOptions()).replace(allow_hf_fallback=allow_fallback)
    options = options if backend is None else options.replace(backend=backend)
    shared = _shared_build(tokenizer, options)
    if shared is not None:
        logger.warning(
            "%s %s tokenizer for %s (the build of an earlier load in this process, shared in %.1f s): %s",
            server,
            process,
            model,
            time.monotonic() - started,
            shared.tokbackend.describe(),
        )
        return shared
    try:
        accelerated: PreTrainedTokenizerBase = tokbackend.accelerate(tokenizer, options=options)
    except (tokbackend.BackendUnavailableError, tokbackend.FastPathError, TypeError) as error:
        raise RuntimeError(
            f"tokbackend: {flag} cannot serve {model} in {server} process {process}: {error}. "
            f"Remove the flag, or set {ALLOW_FALLBACK_ENV}=1 to serve it with HuggingFace."
        ) from error
    except Exception as error:  # an error of ours (a missing package-data file, say): say so, stop
        reason = f"building the fast path failed: {type(error).__name__}: {error}"
        if not allow_fallback:
            raise RuntimeError(
                f"tokbackend: {flag} cannot serve {model} in {server} process {process}: {reason}; refusing to start "
                f"with a silent downgrade. Set {ALLOW_FALLBACK_ENV}=1 to serve it with HuggingFace."
            ) from error
        logger.error(
            "%s %s tokenizer for %s: %s; serving it with HuggingFace (%s=1)", server, process, model, reason, ALLOW_FALLBACK_ENV
        )
        return tokenizer
    state = accelerated.tokbackend
    built = f" (built in {time.monotonic() - started:.1f} s)"
    logger.warning("%s %s tokenizer for %s%s: %s", server, process, model, built, state.describe())
    if not state.fast_path_enabled and not allow_fallback:
        raise RuntimeError(
            f"tokbackend: {flag}: the fast path is off for {model} ({state.disabled_reason}); refusing to start "
            f"with a silent downgrade. Set {ALLOW_FALLBACK_ENV}=1 to serve it with HuggingFace."
        )
    global _built  # only a build that start-up accepted is shared
    _built = (*(entry for entry in _built if entry() is not None), weakref.ref(accelerated))
    return accelerated


def _shared_build(tokenizer: PreTrainedTokenizerBase, options: AccelerationOptions) -> PreTrainedTokenizerBase | None:
    """`tokenizer` accelerated with the build of a tokenizer this process accelerated earlier
    with these options, where the two encode alike (`accelerate_like`); else None."""
    from tokbackend._tokenizer import accelerate_like

    earlier = [entry() for entry in reversed(_built)]
    for candidate in earlier:
        if candidate is not None and candidate.tokbackend.options == options:
            shared = accelerate_like(tokenizer, candidate)
            if shared is not None:
                return shared
    return None
