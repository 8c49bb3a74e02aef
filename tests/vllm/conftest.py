"""Fixtures for the vLLM integration tests: real vLLM code (0.33.0, 0.34.0), in-process, on the CPU.

These run in .ci/run's vLLM stage (a venv with vLLM installed --no-deps, see requirements.txt);
the main test command leaves this folder out (see pyproject.toml).
"""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# vLLM 0.34's CPU platform refuses to build a config on x86 without a Triton it counts as active;
# with no GPU driver, its check accepts an installed Triton where CUDA_VISIBLE_DEVICES is empty
# (its own rule for a process whose devices are not yet visible). Nothing here runs a kernel.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

from tokbackend.equivalence.server_models import tiny_qwen3_model  # noqa: E402

MAX_MODEL_LEN = 4096


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    """A model directory vLLM can read: the built-in Qwen3.6 tokenizer plus a small config
    (no weights: nothing here runs the model)."""
    return str(tiny_qwen3_model(tmp_path_factory.mktemp("qwen36-model"), "qwen3.6"))


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
