"""What a new user meets in the first hour: the install, the logs, errors for a missing model,
and a verify report that says what it checked."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from importlib.metadata import requires

import pytest

import tokbackend
from tokbackend import _cli as cli
from tokbackend._verify import (
    EXIT_MISSING_TOOLS,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PARTIAL,
    StepResult,
    VerifyReport,
    verdict,
)


def _run_cli(*arguments: str, code: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    command = (
        [sys.executable, "-c", code, *arguments] if code else [sys.executable, "-m", "tokbackend._cli", *arguments]
    )
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=cwd)


def test_a_plain_install_brings_no_torch_cuda_or_test_tools():
    core = [requirement for requirement in requires("tokbackend") if "extra ==" not in requirement]
    names = {re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0].lower() for requirement in core}
    assert names.isdisjoint({"torch", "xgrammar", "hypothesis", "faker", "triton", "pytest"}), names
    assert {"gigatoken", "transformers", "tokenizers"} <= names
    verify_extra = [requirement for requirement in requires("tokbackend") if 'extra == "verify"' in requirement]
    assert any(requirement.startswith("xgrammar") for requirement in verify_extra)
    assert any(requirement.startswith("hypothesis") for requirement in verify_extra)


def test_verify_names_the_extra_when_its_tools_are_missing():
    code = (
        "import sys; sys.modules['hypothesis'] = None; from tokbackend._cli import main; sys.exit(main(sys.argv[1:]))"
    )
    completed = _run_cli("verify", "qwen3", "--quick", code=code)
    assert completed.returncode == EXIT_MISSING_TOOLS
    assert "pip install 'tokbackend[verify]'" in completed.stderr and "hypothesis" in completed.stderr


def test_a_quick_check_that_passes_exits_0_and_a_narrowed_run_exits_7():
    def report(*skipped: tuple[str, str]) -> VerifyReport:
        steps = [
            StepResult("load", "ok", "", 0.0),
            *(StepResult(name, "skipped", detail, 0.0) for name, detail in skipped),
        ]
        return VerifyReport("m", "b", steps)

    quick = report(("code-point scan", "--quick"), ("grammar gate", "--quick"))
    assert quick.exit_code == EXIT_OK
    assert verdict(quick) == "quick check passed (skipped: code-point scan; grammar gate)"
    narrowed = report(("code-point scan", "--quick"), ("speed", "not in --only"))
    assert narrowed.exit_code == EXIT_PARTIAL
    assert verdict(narrowed).startswith("passed, but NOT a full verification")
    assert report(("grammar gate", "xgrammar is not installed")).exit_code == EXIT_PARTIAL


def test_help_says_what_quick_leaves_out(capsys):
    with pytest.raises(SystemExit):
        cli.main(["verify", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    quick = help_text[help_text.index("--quick ") :]
    for left_out in ("code-point scan", "changes after acceleration", "grammar gate"):
        assert left_out in quick[:300], quick[:300]
    from tokbackend._verify import EXIT_CODES

    for code, meaning in EXIT_CODES.items():  # the one table, as docs/verify.md holds it
        assert f"{code} {' '.join(meaning.replace('`', '').split())}" in help_text


def test_long_details_are_cut_with_an_ellipsis():
    from tokbackend._verify import StepResult, VerifyReport, summary_table

    table = summary_table(VerifyReport("m", "b", [StepResult("load", "ok", "x" * 300, 1.0)]))
    assert "x" * 109 + "…" in table and "x" * 111 not in table


@pytest.mark.parametrize("model", ["no-such-model", "Qwen/Qwen3-8B"])
def test_a_model_that_is_not_found_locally_is_reported_as_such(model):
    completed = _run_cli("verify", model, "--quick")
    assert completed.returncode == EXIT_NOT_FOUND, completed.stdout + completed.stderr
    assert "not in the local HuggingFace cache" in completed.stdout
    assert f"hf download {model}" in completed.stdout
    assert "cannot serve" not in completed.stdout
    assert "local_files_only" not in completed.stdout  # a Python argument: the command has no such flag


@pytest.mark.parametrize("model", ["./does-not-exist", "nested/does/not-exist", "empty-directory"])
def test_a_directory_that_does_not_hold_a_tokenizer_is_named_as_a_directory(model, monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty-directory").mkdir()
    assert cli.main(["verify", model, "--quick", "--no-progress"]) == EXIT_NOT_FOUND
    output = capsys.readouterr().out
    why = "holds no tokenizer" if model == "empty-directory" else "does not exist"
    assert f"directory {model!r} {why}" in output, output
    assert "hf download" not in output


def test_load_does_not_wait_on_a_network_it_cannot_reach(monkeypatch):
    import socket

    connected = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: connected.append(address))
    with pytest.raises(tokbackend.ModelNotFoundError, match="hf download Qwen/Qwen3-8B") as error:
        tokbackend.load("Qwen/Qwen3-8B")
    assert not connected  # not even an attempt
    assert "local_files_only=False" in str(error.value)  # for Python callers, who can pass it


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_transformers(flag):
    code = (
        "import sys\nimport tokbackend._cli\ntry:\n    tokbackend._cli.main(sys.argv[1:])\nexcept SystemExit:\n "
        "   pass\n"
        "from tokbackend._process import preload\npreload.wait()\nprint('transformers' in sys.modules)"
    )
    completed = _run_cli(flag, code=code)
    assert completed.stdout.splitlines()[-1] == "False", completed.stdout + completed.stderr


def test_importing_tokbackend_without_torch_prints_no_pytorch_advisory():
    """A plain install has no torch; transformers' other messages still pass."""
    code = (
        "import logging, sys\nsys.modules['torch'] = None\nimport tokbackend\ntokbackend.accelerate\n"
        "assert 'transformers' in sys.modules\nlogging.getLogger('transformers').warning('another message of "
        "transformers')"
    )
    completed = _run_cli(code=code)
    assert completed.returncode == 0, completed.stderr
    assert "PyTorch was not found" not in completed.stdout + completed.stderr
    assert "another message of transformers" in completed.stderr


def test_guard_progress_into_a_file_is_plain_lines(tmp_path):
    log = tmp_path / "guard.log"
    with log.open("wb") as handle:  # bytes: text mode would turn a carriage return into a newline
        command = [
            sys.executable,
            "-m",
            "tokbackend._cli",
            "guard",
            "qwen3",
            "--backend",
            "fastokens",
            "--output",
            str(tmp_path),
        ]
        completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=handle, timeout=600, check=False)
    written = log.read_bytes()
    assert completed.returncode == 0, written[-2000:]
    assert b"\r" not in written + completed.stdout
    assert any(line.startswith(b"  fastokens: ") for line in written.splitlines()), written


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tokbackend {tokbackend.__version__}"


def test_stats_name_a_builtin_model_by_its_name():
    assert tokbackend.load("qwen3.6").tokbackend.stats()["model"] == "qwen3.6"


def test_routine_fallbacks_log_at_info_and_bad_input_is_named(fresh_pair, caplog):
    hf, fast = fresh_pair
    with caplog.at_level(logging.INFO, logger="tokbackend"):
        fast.encode("guarded \u1ae6 text")
        with pytest.raises(type(_hf_error(hf, "lone \ud800 surrogate"))):
            fast.encode("lone \ud800 surrogate")
    by_reason = {
        reason: record
        for record in caplog.records
        for reason in ("unicode_guard", "bad_input")
        if f"reason: {reason}" in record.getMessage()
    }
    assert by_reason["unicode_guard"].levelno == logging.INFO
    assert by_reason["bad_input"].levelno == logging.INFO
    stats = fast.tokbackend.stats()["fallbacks"]
    assert stats.get("bad_input") == 1 and "backend_error" not in stats
    assert not any(record.getMessage().startswith("tokbackend:") for record in caplog.records)


def _hf_error(hf, text: str) -> BaseException:
    try:
        hf.encode(text)
    except BaseException as error:  # noqa: BLE001 - whatever HF raises is the expected type
        return error
    raise AssertionError("HF accepted the text")
