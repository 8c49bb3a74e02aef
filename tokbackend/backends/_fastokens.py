"""The fastokens backend: HF-compatible BPE in Rust with PCRE2, GIL released while it encodes.

Called directly, never through its process-global `patch_transformers()`. A single text's ids
come back faster as `Encoding.ids` on some machines and from `encode_batch_flat`'s buffer on
others, so a warmed backend times both and keeps the faster. Its memory stays bounded, and its
thread pools survive os.fork().
"""

from __future__ import annotations

import array
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tokbackend.backends._arrays import split_uint32
from tokbackend.backends._base import import_library, loading_tokenizer_json, panics_as_errors
from tokbackend.backends._warmup import builtin_texts

# made once: it keeps no state
_PANICS_AS_ERRORS = panics_as_errors("fastokens")


@dataclasses.dataclass(frozen=True)
class FastokensOptions:
    """warm: `prepare()` encodes ~1 MB of built-in text (thread pool, allocators), then times the
    two single-text forms and keeps the faster; until then, and unwarmed, `Encoding.ids`."""

    warm: bool = True


class FastokensBackend:
    """Plain-text encode through fastokens, loaded from the tokenizer's own tokenizer.json."""

    Options = FastokensOptions
    name = "fastokens"
    is_reference = False
    needs_unicode_guard = True  # PCRE2's Unicode tables are not HF tokenizers' either
    versioned_libraries = ("fastokens",)
    guard_family = "fastokens"
    auto_preference = 10  # bounded memory, GIL released, the faster in bench/backends.py's runs
    preloads = ("fastokens",)
    grows_without_bound = False

    def __init__(self, tokenizer_json: str, options: FastokensOptions = FastokensOptions()) -> None:
        fastokens = import_library("fastokens", "fastokens>=0.3.5,<0.4")
        with loading_tokenizer_json("fastokens"):
            self._rust = fastokens.Tokenizer.from_json_str(tokenizer_json)
            self._rust.no_truncation()
            self._rust.no_padding()
        self.single_form = "ids"
        # the chosen single-text form, bound on the instance: a call is one Python frame
        self.encode: Callable[[str], list[int]] = self._ids
        self.single_form_ms: dict[str, float] = {}
        self._warm = options.warm

    @classmethod
    def options_for_scanning(cls) -> FastokensOptions:
        return FastokensOptions(warm=False)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # `encode_batch`'s ids lists are cheaper to collect than slicing the flat buffer per text
        try:
            return [encoding.ids for encoding in self._rust.encode_batch(texts)]
        except BaseException as error:
            raise _PANICS_AS_ERRORS.converted(error) from None

    def encode_array(self, text: str) -> array.array[int]:
        return self.encode_batch_arrays([text])[0]

    def encode_batch_arrays(self, texts: list[str]) -> list[array.array[int]]:
        with _PANICS_AS_ERRORS:
            ids_buffer, offsets_buffer = self._rust.encode_batch_flat(texts)
        return split_uint32(np.frombuffer(ids_buffer, dtype="<u4"), np.frombuffer(offsets_buffer, dtype="<u8"))

    def stats(self) -> dict[str, Any]:
        return {"fastokens_single_form": self.single_form}

    def prepare(self) -> None:
        if self._warm:
            self.encode_batch(list(builtin_texts())[:10])
            self._choose_single_form()

    def _ids(self, text: str) -> list[int]:
        try:
            ids: list[int] = self._rust.encode(text).ids  # fastokens ships no py.typed
            return ids
        except BaseException as error:
            raise _PANICS_AS_ERRORS.converted(error) from None

    def _flat(self, text: str) -> list[int]:
        with _PANICS_AS_ERRORS:
            ids_buffer, _ = self._rust.encode_batch_flat([text])
        ids = array.array("I", ids_buffer)
        if sys.byteorder == "big":  # pragma: no cover - the buffer is little-endian
            ids.byteswap()
        return ids.tolist()

    def _choose_single_form(self) -> None:
        """Time both forms on 6 built-in texts of 100k characters, alternating which goes first
        (the second meets the text in fastokens' caches), and serve single texts with the faster."""
        forms = {"ids": self._ids, "flat": self._flat}
        seconds = dict.fromkeys(forms, 0.0)
        for index, text in enumerate(builtin_texts()[10:16]):
            for name in forms if index % 2 == 0 else reversed(forms):
                started = time.perf_counter()
                forms[name](text)
                seconds[name] += time.perf_counter() - started
        self.single_form = min(seconds, key=seconds.__getitem__)
        self.encode = forms[self.single_form]
        self.single_form_ms = {name: total * 1e3 for name, total in seconds.items()}
