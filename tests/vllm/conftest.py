"""Fixtures for the vLLM integration tests: real vLLM 0.33.0 code, in-process, on the CPU.

These run in .ci/run's vLLM stage (a venv with vLLM installed --no-deps, see requirements.txt);
the main test command leaves this folder out (see pyproject.toml).
"""

from __future__ import annotations

import json
import os
import shutil

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

import tokbackend  # noqa: E402

MAX_MODEL_LEN = 4096
QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 248320,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "max_position_embeddings": 65536,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "eos_token_id": 248046,
    # without it transformers 5.19 suspects a Mistral regex in a local config
    "transformers_version": "5.19.0",
}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    """A model directory vLLM can read: the built-in Qwen3.6 tokenizer plus a small config
    (no weights: nothing here runs the model)."""
    directory = tmp_path_factory.mktemp("qwen36-model")
    source = tokbackend.load_hf("qwen3.6").name_or_path
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(source, name), directory / name)
    (directory / "config.json").write_text(json.dumps(QWEN3_CONFIG))
    return str(directory)


@pytest.fixture(scope="session")
def plugins_loaded():
    from vllm.plugins import load_general_plugins

    load_general_plugins()


@pytest.fixture(scope="session")
def hf_reference(model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.truncation_side = "left"  # what vLLM sets for generate models
    return tokenizer


def vllm_config(model_dir: str, mode: str, max_model_len: int = MAX_MODEL_LEN):
    from vllm.config import ModelConfig, VllmConfig

    model_config = ModelConfig(model=model_dir, tokenizer_mode=mode, max_model_len=max_model_len, dtype="float32")
    return VllmConfig(model_config=model_config)


@pytest.fixture(scope="session")
def renderer(model_dir, plugins_loaded):
    """vLLM's own renderer for `--tokenizer-mode gigatoken` (HfRenderer, with its thread pool)."""
    from vllm.renderers import renderer_from_config

    return renderer_from_config(vllm_config(model_dir, "gigatoken"))
