"""The fastokens backend: HF-compatible BPE in Rust with PCRE2, GIL released while it encodes.

Called directly, never through its process-global `patch_transformers()`; its memory stays bounded,
and its thread pools survive os.fork().
"""

from __future__ import annotations

import array
import dataclasses
from typing import Any

import numpy as np

from tokbackend.backends._arrays import split_uint32
from tokbackend.backends._base import PanicConverter, import_library, loading_tokenizer_json
from tokbackend.backends._warmup import builtin_texts

# made once: it keeps no state
_PANICS = PanicConverter("fastokens")


@dataclasses.dataclass(frozen=True)
class FastokensOptions:
    """warm: `prepare()` encodes built-in text (its thread pool, allocators)."""

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
        self._warm = options.warm

    @classmethod
    def options_for_scanning(cls) -> FastokensOptions:
        return FastokensOptions(warm=False)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # `encode_batch`'s ids lists are cheaper to collect than slicing the flat buffer per text
        try:
            return [encoding.ids for encoding in self._rust.encode_batch(texts)]
        except BaseException as error:
            raise _PANICS.converted(error) from None

    def encode_array(self, text: str) -> array.array[int]:
        return self.encode_batch_arrays([text])[0]

    def encode_batch_arrays(self, texts: list[str]) -> list[array.array[int]]:
        with _PANICS:
            ids_buffer, offsets_buffer = self._rust.encode_batch_flat(texts)
        return split_uint32(np.frombuffer(ids_buffer, dtype="<u4"), np.frombuffer(offsets_buffer, dtype="<u8"))

    def stats(self) -> dict[str, Any]:
        return {}

    def prepare(self) -> None:
        if self._warm:
            self.encode_batch(list(builtin_texts())[:10])

    def encode(self, text: str) -> list[int]:
        try:
            ids: list[int] = self._rust.encode(text).ids  # fastokens ships no py.typed
            return ids
        except BaseException as error:
            raise _PANICS.converted(error) from None
