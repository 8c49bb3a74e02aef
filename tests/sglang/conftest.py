"""Fixtures for the SGLang integration tests: real SGLang code (0.5.13 to 0.5.23), in-process,
on the CPU.

These run in .ci/run's SGLang stages, one venv per release tested (the oldest and the newest
supported: SGLang installed --no-deps, `tests/sglang/requirements-X.txt`, CPU torch 2.13.0 and a
torchvision stand-in in `tests/sglang/shims`); the main test command leaves this folder out
(see pyproject.toml).
"""

from __future__ import annotations

import pytest

from tokbackend.equivalence.server_models import tiny_qwen3_model

# Checks of tokbackend's own start-up contract (a model it cannot serve, a failed build, a derived
# guard, a shared build) that reach SGLang through one `get_tokenizer` call, the same in every
# release: .ci/run runs them on the newest release tested; by hand, run them on each.
NEWEST_RELEASE_IN_CI = "newest_release_in_ci"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{NEWEST_RELEASE_IN_CI}: in CI on the newest SGLang release tested only (see tests/sglang/conftest.py)",
    )


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A model directory SGLang can read: the built-in Qwen3.6 tokenizer plus a small config
    (no weights: nothing here runs the model)."""
    return str(tiny_qwen3_model(tmp_path_factory.mktemp("qwen36-model"), "qwen3.6", max_positions=32768))


@pytest.fixture(scope="session")
def plugins_loaded():
    from sglang.srt.plugins import load_plugins

    load_plugins()
    return True


@pytest.fixture(scope="session")
def server_args(model_dir, plugins_loaded):
    """ServerArgs for `--tokenizer-backend gigatoken`, resolved and published as SGLang's
    launcher does before it builds the tokenizer manager."""
    from sglang.srt.entrypoints import engine
    from sglang.srt.server_args import ServerArgs

    arguments = ServerArgs(model_path=model_dir, tokenizer_backend="gigatoken", device="cpu", skip_server_warmup=True)
    if hasattr(arguments, "resolve_once"):  # 0.5.19 on
        arguments.resolve_once()
    arguments.check_server_args()
    engine.resolve_auto_parsers(arguments)
    if hasattr(engine, "publish"):  # 0.5.18 on
        engine.publish(arguments, role="tokenizer")
    return arguments


@pytest.fixture(scope="session")
def port_args(server_args):
    from sglang.srt.server_args import PortArgs

    return PortArgs.init_new(server_args)


@pytest.fixture(scope="session")
def tokenizer_manager(server_args, port_args):
    from sglang.srt.managers.tokenizer_manager import TokenizerManager

    return TokenizerManager(server_args, port_args)


@pytest.fixture(scope="session")
def hf_reference(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)
