"""`tokbackend verify` gives a verdict on every tokenizer HF loads, never a traceback: a family
matrix built offline, HF's exceptions compared as answers, an error of verify's own harness as
its own exit code, and the messages a new user meets in the first hour (damaged files, a file
passed for a directory, the server flag's value, plurals, the `--only` verdict, the report)."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from defects import rust_panic

import tokbackend
from tokbackend import _cli as cli
from tokbackend import _verify as verify
from tokbackend._verify import (
    EXIT_HARNESS,
    EXIT_MISMATCH,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_UNAVAILABLE,
    STEP_TITLES,
    StepResult,
    VerifyReport,
    verdict,
    verify_model,
)
from tokbackend.equivalence.differential import Raised, answer_of, compare
from tokbackend.equivalence.families import family_dir

VERDICT_LINE = re.compile(r"^result: .+ \(model .+, exit (\d+)\)$", re.MULTILINE)
# Families beyond the built-in Qwen models (whose quick verify test_verify runs): Llama 3 (no pad
# token), gpt-oss (o200k), DeepSeek-V3 (a Sequence of Splits), Mistral Tekken, a SentencePiece-style
# Metaspace pipeline; small vocabularies, so each takes seconds.
SERVED_FAMILIES = ("llama3", "gpt-oss", "deepseek-v3", "tekken", "mistral-metaspace")


def _run_cli(*arguments: str, cache_dir: Path) -> subprocess.CompletedProcess:
    """`tokbackend ARGUMENTS` in a process of its own, with a cache of its own (no choice of auto
    remembered by another test)."""
    environment = {**os.environ, "TOKBACKEND_CACHE_DIR": str(cache_dir)}
    command = [sys.executable, "-m", "tokbackend._cli", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, env=environment)


def _verdict_exit(completed: subprocess.CompletedProcess) -> int:
    """The exit code the verdict line names; fails where there is no verdict line or a traceback."""
    output = completed.stdout + completed.stderr
    assert "Traceback" not in output, output[-3000:]
    found = VERDICT_LINE.findall(completed.stdout)
    assert found, f"no verdict line: {output[-3000:]}"
    assert int(found[-1]) == completed.returncode
    return completed.returncode


# -- a verdict on every family ----------------------------------------------------------------


# in CI: a family without a pad token (Llama 3) and one beyond byte-level BPE (Metaspace); every
# family in the thorough profile
@pytest.mark.parametrize(
    "family",
    [
        family if family in ("llama3", "mistral-metaspace") else pytest.param(family, marks=pytest.mark.slow)
        for family in SERVED_FAMILIES
    ],
)
def test_a_quick_verify_gives_a_verdict_on_every_family(family, tmp_path):
    completed = _run_cli("verify", str(family_dir(family, "small")), "--quick", "--no-progress", cache_dir=tmp_path)
    assert _verdict_exit(completed) == EXIT_OK, completed.stdout[-3000:]
    assert "quick check passed" in completed.stdout


def test_the_families_test_verify_leaves_to_the_quick_verify_get_it_here():
    """test_verify.py runs its family check on these in -m slow alone: the quick verify above
    must cover them in CI."""
    from test_verify import QUICK_VERIFIED_ELSEWHERE

    assert set(QUICK_VERIFIED_ELSEWHERE) <= set(SERVED_FAMILIES)


@pytest.mark.slow
@pytest.mark.parametrize("family", SERVED_FAMILIES)
def test_a_full_verify_gives_a_verdict_on_every_family(family, tmp_path):
    completed = _run_cli("verify", str(family_dir(family, "small")), "--no-progress", cache_dir=tmp_path)
    assert _verdict_exit(completed) == EXIT_OK, completed.stdout[-3000:]
    assert "exact and usable" in completed.stdout


def test_a_tokenizer_without_a_pad_token_is_compared_not_crashed_on(tmp_path):
    """Llama 3 has no pad token: HF raises on the sharing step's padding call, and ours must
    raise the same. Before, the step's first padding call raised out of verify (exit 1, a
    traceback under "mismatch")."""
    directory = family_dir("llama3", "small")
    assert tokbackend.load_hf(str(directory)).pad_token is None
    completed = _run_cli("verify", str(directory), "--only", "sharing", "--no-progress", cache_dir=tmp_path)
    assert _verdict_exit(completed) == EXIT_PARTIAL, completed.stdout[-3000:]
    assert re.search(r"^threads, state, warnings, results\s+ok", completed.stdout, re.MULTILINE)


def test_a_wordpiece_model_no_backend_serves_exits_6_naming_why(tmp_path):
    completed = _run_cli("verify", str(family_dir("bert", "small")), "--quick", "--no-progress", cache_dir=tmp_path)
    assert _verdict_exit(completed) == EXIT_UNAVAILABLE
    assert "backend cannot serve this model" in completed.stdout
    assert "WordPiece" in completed.stdout and "BertNormalizer" in completed.stdout


def test_a_slow_only_tokenizer_exits_6_naming_why(tmp_path):
    """ByT5 has no fast tokenizer: HF loads it as a Python tokenizer, which no backend serves."""
    directory = tmp_path / "byt5"
    directory.mkdir()
    config = {"tokenizer_class": "ByT5Tokenizer", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    (directory / "tokenizer_config.json").write_text(json.dumps({**config, "extra_ids": 0}))
    completed = _run_cli("verify", str(directory), "--quick", "--no-progress", cache_dir=tmp_path / "cache")
    assert _verdict_exit(completed) == EXIT_UNAVAILABLE
    assert "slow (Python) tokenizer ByT5Tokenizer" in completed.stdout


# -- an error of verify's own harness ---------------------------------------------------------


@pytest.mark.parametrize("planted", [KeyError("planted"), rust_panic("planted")], ids=["exception", "rust-panic"])
def test_a_harness_step_that_raises_exits_8_not_1(planted, monkeypatch, capsys, tmp_path):
    def broken(step, *arguments):
        raise planted

    monkeypatch.setattr(verify, "_chat", broken)
    report_path = tmp_path / "report.json"
    arguments = [
        "verify",
        str(family_dir("llama3", "small")),
        "--only",
        "chat",
        "--no-progress",
        "--json",
        str(report_path),
    ]
    exit_code = cli.main(arguments)
    output = capsys.readouterr()
    assert exit_code == EXIT_HARNESS, output.out[-3000:]
    assert re.search(r"^chat template\s+error", output.out, re.MULTILINE)
    assert f"{type(planted).__name__}: " in output.out and "planted" in output.out
    assert "NO VERDICT: chat template stopped on an error before comparing" in output.out
    assert "Traceback" not in output.out + output.err
    report = json.loads(report_path.read_text())
    [step] = [step for step in report["steps"] if step["name"] == "chat template"]
    assert "Traceback" in step["data"]["traceback"] and "certified" not in report


def test_an_interrupt_inside_a_step_is_not_taken_for_an_error(monkeypatch):
    def interrupted(step, *arguments):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify, "_chat", interrupted)
    assert cli.main(["verify", str(family_dir("llama3", "small")), "--only", "chat", "--no-progress"]) == 130


# -- answers, exceptions included --------------------------------------------------------------


def _raises(kind: type[BaseException]):
    def encode(text: str) -> list[int]:
        raise kind(f"planted on {text!r}")

    return encode


def test_an_exception_is_an_answer_compared_by_its_class():
    assert compare(_raises(ValueError), _raises(ValueError), "x") is None
    different = compare(_raises(ValueError), _raises(TypeError), "x")
    assert different is not None and different.first_difference == 0
    assert "reference: raises ValueError: planted on 'x'" in different.report()
    assert "candidate: raises TypeError" in different.report()
    raising_where_hf_answers = compare(lambda text: [1, 2], _raises(RuntimeError), "x")
    assert (
        raising_where_hf_answers is not None and "candidate: raises RuntimeError" in raising_where_hf_answers.report()
    )
    answering_where_hf_raises = compare(_raises(ValueError), lambda text: [1, 2], "x")
    assert (
        answering_where_hf_raises is not None and "reference: raises ValueError" in answering_where_hf_raises.report()
    )


def test_a_rust_panic_is_an_answer_and_an_interrupt_is_not():
    def panics() -> list[int]:
        raise rust_panic("index out of bounds")

    answer = answer_of(panics)
    assert answer == Raised("PanicException", "") and "index out of bounds" in str(answer)
    with pytest.raises(KeyboardInterrupt):
        answer_of(_raises(KeyboardInterrupt), "x")


def test_the_sharing_check_fails_where_ours_answers_a_call_hf_refuses():
    """Planted: the accelerated copy has a pad token HF's lacks, so it pads where HF raises."""
    from tokbackend.equivalence.sharing import settings_left

    hf = tokbackend.load_hf(str(family_dir("llama3", "small")))
    assert settings_left(copy.deepcopy(hf), tokbackend.accelerate(copy.deepcopy(hf)), "a b") is None
    accelerated = tokbackend.accelerate(copy.deepcopy(hf))
    accelerated.pad_token = accelerated.eos_token
    difference = settings_left(copy.deepcopy(hf), accelerated, "a b")
    assert difference is not None and "a 'padding' call answers, HF's raises ValueError" in difference, difference


def test_warnings_of_verifys_own_calls_are_compared_not_printed():
    """transformers warns that `max_length` is ignored when padding=True without truncation: an
    answer of verify's call, collected (a full verify printed it), and a candidate that warns
    otherwise differs."""
    from tokbackend.equivalence.arguments import Call, outcome

    hf = tokbackend.load_hf(str(family_dir("llama3", "small")))
    hf.pad_token = hf.eos_token
    accelerated = tokbackend.accelerate(copy.deepcopy(hf))
    call = Call("__call__", "hello world", {"padding": True, "max_length": 5})
    with warnings.catch_warnings(record=True) as leaked:
        warnings.simplefilter("always")
        theirs, ours = outcome(hf, call), outcome(accelerated, call)
    assert leaked == []
    assert any("`max_length` is ignored" in warning for warning in theirs[-1])
    assert ours == theirs

    class WarnsToo(type(accelerated)):
        def __call__(self, *arguments, **kwargs):
            warnings.warn("planted", UserWarning, stacklevel=2)
            return super().__call__(*arguments, **kwargs)

    accelerated.__class__ = WarnsToo
    assert outcome(accelerated, call) != theirs


def test_the_grammar_gate_fails_where_a_generation_differs_from_hfs():
    """On the small Llama 3 vocabulary xgrammar's own generations fail with HF's tokenizer too
    (reported apart); a planted decode that differs from HF's fails the gate."""
    from tokbackend.equivalence.grammar import grammar_gate

    hf = tokbackend.load_hf(str(family_dir("llama3", "small")))
    accelerated = tokbackend.accelerate(copy.deepcopy(hf))
    assert grammar_gate(accelerated, hf, generations=2).passed

    class DecodesOtherwise(type(accelerated)):
        def decode(self, *arguments, **kwargs):
            return super().decode(*arguments, **kwargs).replace('"', "'")

    accelerated.__class__ = DecodesOtherwise
    result = grammar_gate(accelerated, hf, generations=2)
    assert not result.passed and len(result.failures) == 2, result


# -- the first hour's messages -----------------------------------------------------------------


@pytest.mark.parametrize("damaged", ["tokenizer.json", "tokenizer_config.json"])
def test_a_damaged_file_is_named_and_no_backend_is_blamed(damaged, tmp_path):
    directory = tmp_path / "model"
    directory.mkdir()
    for path in family_dir("llama3", "small").iterdir():
        (directory / path.name).write_bytes(path.read_bytes())
    content = (directory / damaged).read_bytes()
    (directory / damaged).write_bytes(content[: len(content) // 2])
    with pytest.raises(tokbackend.ModelFilesError, match=re.escape(f"{directory / damaged} is not valid JSON")):
        tokbackend.load(str(directory))
    completed = _run_cli("verify", str(directory), "--quick", "--no-progress", cache_dir=tmp_path / "cache")
    assert _verdict_exit(completed) == EXIT_UNAVAILABLE
    assert "HuggingFace cannot load this model's files" in completed.stdout
    assert f"{directory / damaged} is not valid JSON" in completed.stdout
    assert "backend" not in completed.stdout.split("== load", 1)[1].split("\n\n", 1)[0]


def test_a_tokenizer_json_path_is_its_directory_and_another_file_is_said_to_be_one(tmp_path):
    directory = family_dir("llama3", "small")
    assert len(tokbackend.load_hf(str(directory / "tokenizer.json"))) == len(tokbackend.load_hf(str(directory)))
    other = tmp_path / "notes.txt"
    other.write_text("not a tokenizer")
    with pytest.raises(tokbackend.ModelNotFoundError, match="is a file, not a tokenizer directory"):
        tokbackend.load_hf(str(other))
    report = verify_model(str(directory / "tokenizer.json"), only={"chat"}, announce=lambda line: None, progress=False)
    assert report.exit_code == EXIT_PARTIAL and report.steps[0].status == "ok"
    assert verify_model(str(other), announce=lambda line: None).exit_code == EXIT_NOT_FOUND


def test_verify_takes_a_server_flags_value_and_certifies_that_lane():
    from tokbackend._routing.names import flag_values

    parser = cli.build_parser()
    for value in flag_values():
        assert parser.parse_args(["verify", "qwen3", "--backend", value]).backend == value
    lines: list[str] = []
    report = verify_model(
        str(family_dir("llama3", "small")),
        backend="tokbackend-gigatoken",
        only={"chat"},
        announce=lines.append,
        progress=False,
    )
    assert report.backend == "gigatoken" and [entry["backend"] for entry in report.checked] == ["gigatoken"]
    report = verify_model(str(family_dir("llama3", "small")), backend="tokbackend-auto", only={"chat"}, progress=False)
    assert report.backend == "auto"


def test_an_unknown_option_prints_verifys_own_usage(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["verify", "qwen3", "--bogus"])
    error = capsys.readouterr().err
    assert exited.value.code == 2
    assert error.startswith("usage: tokbackend verify") and "unrecognized arguments: --bogus" in error


def test_counts_read_in_the_singular_and_the_plural():
    from tokbackend._guard import UnicodeGuard
    from tokbackend._guard.scan import ScanContext, ScanReport
    from tokbackend._wording import counted

    assert (counted(1, "code point"), counted(0, "code point"), counted(2, "class", "classes")) == (
        "1 code point",
        "0 code points",
        "2 classes",
    )
    assert UnicodeGuard(frozenset({0x17F})).describe().startswith("1 code point; ")
    context = ScanContext("a{}b", "contractions")
    assert ScanReport({context: [0x17F]}, 1, 0.0).summary().startswith("1 divergent code point (contractions 1)")
    assert ScanReport({context: []}, 1, 0.0).summary() == "no divergent code points (1 code point x 1 context)"


def test_the_verdict_lists_skipped_steps_unambiguously():
    """Step titles hold commas ("threads, state, warnings, results"): the list is separated by
    semicolons, and no title holds one."""
    assert not any(";" in title for title in STEP_TITLES.values())
    steps = [
        StepResult("load", "ok", "", 0.0),
        *(StepResult(title, "skipped", "--quick", 0.0) for title in STEP_TITLES.values()),
    ]
    quick = VerifyReport("m", "auto", steps)
    assert verdict(quick) == f"quick check passed (skipped: {'; '.join(STEP_TITLES.values())})"
    narrowed = VerifyReport("m", "auto", [*steps[:-1], StepResult("speed", "skipped", "not in --only", 0.0)])
    assert verdict(narrowed) == f"passed, but NOT a full verification (skipped: {'; '.join(STEP_TITLES.values())})"


def test_only_a_run_that_exits_0_carries_a_certified_entry():
    checked = [{"backend": "gigatoken", "versions": {"gigatoken": "0.10.0"}, "guard": "none"}]
    passed = VerifyReport("m", "auto", [StepResult("load", "ok", "", 0.0)], checked)
    narrowed = VerifyReport(
        "m", "auto", [StepResult("load", "ok", "", 0.0), StepResult("x", "skipped", "not in --only", 0.0)], checked
    )
    failed = VerifyReport(
        "m", "auto", [StepResult("load", "ok", "", 0.0), StepResult("x", "mismatch", "", 0.0)], checked
    )
    assert passed.as_json()["certified"] == checked == passed.as_json()["checked"]
    for report, code in ((narrowed, EXIT_PARTIAL), (failed, EXIT_MISMATCH)):
        as_json = report.as_json()
        assert as_json["exit_code"] == code and "certified" not in as_json and as_json["checked"] == checked


def test_the_sglang_gate_makes_its_log_folder_and_counts_only_prompts_it_sent(tmp_path, capsys):
    """No server starts here (a bogus server option, or no SGLang): the gate makes the log folder
    it was given, and says that no prompt was answered rather than counting the ones it built."""
    logs = tmp_path / "new" / "logs"
    arguments = [
        "--model-path",
        str(family_dir("llama3", "small")),
        "--log-dir",
        str(logs),
        "--long",
        "64",
        "--timed",
        "1",
    ]
    exit_code = cli.main(["sglang-gate", *arguments, "--timeout", "120", "--", "--no-such-sglang-option"])
    output = capsys.readouterr().out
    assert exit_code == EXIT_UNAVAILABLE, output[-2000:]
    assert (logs / "server-reference.log").is_file()
    assert "prompts answered, without the flag: 0 prompts; --tokenizer-backend gigatoken: 0 prompts; exit 6" in output
