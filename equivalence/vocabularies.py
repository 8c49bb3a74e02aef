"""Vocabularies with other split regexes than the built-in models', built offline.

The guard's contexts are derived from a tokenizer's own pre-tokenizer, so they must be shown
to work for patterns other than Qwen's: these pair Qwen3's 151,643 ranks with the split regex
of Llama 3 (digits grouped by three) and of o200k (letter case classes, contractions as
optional suffixes, `/` after punctuation runs). Each builds like a built-in model.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tokbackend._cache_dir import cache_dir
from tokbackend._models.qwen import BUILTIN_MODELS, QwenModelSpec, model_dir

LLAMA3_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""  # noqa: E501 - spelled exactly as the file
O200K_SPLIT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# TokenizersBackend loads tokenizer.json as written; Qwen2Tokenizer would rebuild the
# pre-tokenizer with Qwen's own split regex.
VOCABULARIES: dict[str, QwenModelSpec] = {
    name: dataclasses.replace(
        BUILTIN_MODELS["qwen3"], name=name, split_regex=pattern, tokenizer_class="TokenizersBackend"
    )
    for name, pattern in (("llama3-split", LLAMA3_SPLIT), ("o200k-split", O200K_SPLIT))
}


def vocabulary_dir(name: str) -> Path:
    """The directory of test vocabulary `name` ("llama3-split", "o200k-split"), built on first use."""
    return model_dir(VOCABULARIES[name], cache_dir())
