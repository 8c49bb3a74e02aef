"""A model directory a server can read without weights: a built-in tokenizer plus a tiny Qwen3
config. The SGLang and vLLM tests and `bench/servers.py` start real server code on it; nothing
runs the model, so the sizes only have to be valid.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import tokbackend


def tiny_qwen3_model(directory: Path, tokenizer: str = "qwen3.6", max_positions: int = 65536) -> Path:
    """Write `tokenizer`'s files and a config.json for a one-layer Qwen3 into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for path in Path(tokbackend._loading.resolve_model(tokenizer)).iterdir():
        shutil.copy(path, directory / path.name)
    hf = tokbackend.load_hf(tokenizer)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_hidden_layers": 1,
        "vocab_size": -(-len(hf) // 128) * 128,  # the embedding's rows, padded as the real models pad
        "max_position_embeddings": max_positions,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": True,
        "eos_token_id": hf.eos_token_id,
        # without it transformers 5.19 suspects a Mistral regex in a local config
        "transformers_version": "5.19.0",
    }
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def own_pipeline_model(directory: Path, max_positions: int = 32768) -> Path:
    """A model of a user's own that no shipped guard record covers: `tiny_qwen3_model` of Qwen3
    with its split regex reading `\\p{N}` in runs of up to three digits (so its guard is derived
    where it is first served)."""
    directory = tiny_qwen3_model(directory, "qwen3", max_positions)
    path = directory / "tokenizer.json"
    tokenizer_json = path.read_text(encoding="utf-8")
    changed = tokenizer_json.replace(json.dumps(r"\p{N}|")[1:-1], json.dumps(r"\p{N}{1,3}|")[1:-1], 1)
    if changed == tokenizer_json:
        raise ValueError("Qwen3's split regex no longer has the digit alternative own_pipeline_model changes")
    path.write_text(changed, encoding="utf-8")
    # A Qwen2Tokenizer class would rebuild Qwen's own pre-tokenizer over the file's (transformers
    # 5.19 does): the generic class keeps the tokenizer.json as written, as a model of one's own has it.
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8")
    return directory
