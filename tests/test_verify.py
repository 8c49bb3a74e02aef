"""`tokbackend verify`'s contract: its exit codes, and each step failing on a planted defect of the
class it covers."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import pytest
from defects import (
    ArraysDropOnLongTexts,
    DropsAfterDigits,
    DropsBetweenAddedTokens,
    ForgetsAnswers,
    RestoresWithoutWaiting,
    encodings_of_the_current_state,
    finish_without_package_data,
    internal_calls_warn,
    memo_one_id_short,
)
from tokenizers import normalizers

import tokbackend
from tokbackend import _cli as cli
from tokbackend._cache_dir import cache_dir
from tokbackend._guard import guard_versions
from tokbackend._guard.records import BAKED_RECORDS_ENV, find_record, record_key, write_record
from tokbackend._guard.scan import from_ranges, ranges
from tokbackend._state import AccelerationState
from tokbackend._tokenizer import AcceleratedTokenizerMixin, HFReference
from tokbackend._verify import (
    EXIT_GRAMMAR,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    STEPS,
    verify_model,
)


def _run_cli(*arguments: str, cache_dir=None, cwd=None) -> subprocess.CompletedProcess:
    """`cache_dir`: tokbackend's cache for the run (else the user's, whose auto choices any
    process of this user may have written); `cwd`: the working directory."""
    environment = None if cache_dir is None else {**os.environ, "TOKBACKEND_CACHE_DIR": str(cache_dir)}
    command = [sys.executable, "-m", "tokbackend._cli", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, env=environment, cwd=cwd)


@pytest.mark.parametrize("model", ["qwen3.6", pytest.param("qwen3", marks=pytest.mark.slow)])
def test_verify_quick_passes_on_builtin_models_and_says_what_it_left_out(model, tmp_path):
    """`verify X --quick || fail` at boot, as a new user first runs it: a passing quick check
    exits 0, its verdict naming what it left out, with no warning logged, nothing left in the
    working directory, and a report that says what it certified."""
    report_path = tmp_path / "report.json"
    working = tmp_path / "cwd"
    working.mkdir()
    completed = _run_cli(
        "verify", model, "--quick", "--json", str(report_path), cache_dir=tmp_path / "cache", cwd=working
    )
    assert not list(working.iterdir())  # no `.hypothesis/` (Hypothesis' storage) left in the working directory
    assert completed.returncode == EXIT_OK, completed.stdout + completed.stderr
    assert "quick check passed (skipped: code-point scan; changes after acceleration; grammar gate)" in completed.stdout
    assert "exact and usable" not in completed.stdout
    assert re.search(r"^code-point scan\s+skipped", completed.stdout, re.MULTILINE)
    assert re.search(r"^grammar gate\s+skipped", completed.stdout, re.MULTILINE)
    assert "WARNING" not in completed.stdout + completed.stderr
    assert "tokbackend: tokbackend:" not in completed.stdout + completed.stderr
    report = json.loads(report_path.read_text())
    assert report["exit_code"] == EXIT_OK
    assert report["versions"]["tokbackend"] == tokbackend.__version__
    assert report["versions"]["gigatoken"] and report["versions"]["tokenizers"] and report["versions"]["transformers"]
    assert report["guard_record"].endswith(".json")
    assert report["finished_at"] and report["host"]["cpus"] >= 1 and report["host"]["python"]
    assert report["verdict"].startswith("quick check passed")
    # what auto certified: the concrete backend, its versions and the guard record used
    assert [entry["backend"] for entry in report["certified"]] == ["fastokens"] and report["certified"] == report[
        "checked"
    ]
    assert report["certified"][0]["versions"]["fastokens"] and "matched by pipeline" in report["certified"][0]["guard"]
    assert "backend auto -> fastokens (tokenizers" in completed.stdout
    assert [step["name"] for step in report["steps"]][:2] == ["load", "boot probe"]
    properties = next(step for step in report["steps"] if step["name"] == "hypothesis properties")
    assert properties["data"]["backend_answered"] > 0
    # the steps a quick check runs, each passing with the backend answering (the CI profile's
    # passing runs of the sharing and segments steps; at their full counts in -m slow below)
    steps = {step["name"]: step for step in report["steps"]}
    for name in (
        "added tokens side by side",
        "arguments and results",
        "threads, state, warnings, results",
        "segment cache",
    ):
        assert steps[name]["status"] == "ok", steps[name]
    assert re.search(r"^threads, state, warnings, results\s+ok", completed.stdout, re.MULTILINE)
    assert re.search(r"^segment cache\s+ok\s+[\d.]+\s+conversations agree turn by turn", completed.stdout, re.MULTILINE)
    assert "oracle boundaries" in report["steps"][0]["detail"]  # the guard by class and oracle


# Families beyond byte-level BPE, built offline (equivalence/families.py): SentencePiece-style
# Metaspace with byte fallback, a Prepend normalizer, Tekken, DeepSeek-V3's Sequence of Splits,
# Kimi-K2 (gigatoken cannot load it), GPT-2, ModernBERT (~6 s each on 2 cores).
FAMILIES = ("mistral-metaspace", "llama2-legacy", "gemma3", "tekken", "deepseek-v3", "kimi-k2", "gpt2", "modernbert")


# The families test_verify_verdicts.py also verifies with --quick (every step but the scan, the
# changes and the grammar gate, fewer examples) run here in -m slow; the others in CI.
QUICK_VERIFIED_ELSEWHERE = ("mistral-metaspace", "tekken", "deepseek-v3")


@pytest.mark.parametrize(
    "family",
    [pytest.param(name, marks=pytest.mark.slow) if name in QUICK_VERIFIED_ELSEWHERE else name for name in FAMILIES],
)
def test_verify_passes_on_other_tokenizer_families(family):
    """verify's property classes, arguments, results and conversations through `auto` on each
    family: HF's answer everywhere (exit 7: partial, the scan and grammar left out)."""
    from tokbackend.equivalence.families import family_dir

    lines: list[str] = []
    report = verify_model(
        str(family_dir(family, "small")),
        backend="auto",
        examples=20,
        only={"properties", "arguments", "segments"},
        announce=lines.append,
        progress=False,
    )
    assert report.exit_code == EXIT_PARTIAL, "\n".join(lines[-40:])


def test_verify_exits_1_on_a_family_whose_pieces_depend_on_their_position(monkeypatch, capsys):
    """The hold-out's class 1 as a planted defect: Metaspace with prepend_scheme="first" and the
    build-time check of the segment cache's premise turned off, so the cache encodes each piece
    after an added token as if it started the text. The conversations step must fail."""
    from tokbackend.equivalence.families import family_dir

    monkeypatch.setattr("tokbackend._segments.premise_fails", lambda splitter, hf_ids: None)
    directory = str(family_dir("mistral-metaspace", "small"))
    exit_code = cli.main(["verify", directory, "--backend", "gigatoken", "--only", "segments", "--no-progress"])
    output = capsys.readouterr().out
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert "a conversation differs with the segment cache on" in output


# -- exit 1: a mismatch, or a step the fast path took no part in ------------------------------


def test_verify_exits_1_with_a_minimal_example_on_a_wrong_backend(register_for_test):
    register_for_test("drops-after-digits", DropsAfterDigits)
    lines: list[str] = []
    report = verify_model(
        "qwen3", backend="drops-after-digits", quick=True, only={"properties"}, announce=lines.append, progress=False
    )
    assert report.exit_code == EXIT_MISMATCH
    output = "\n".join(lines)
    assert "[digit_runs] input '0'" in output or "input '1'" in output
    assert "first difference at index" in output


def test_verify_exits_1_when_only_the_array_form_is_wrong(register_for_test):
    """A backend right in lists and wrong as `array('q')` (SGLang's form) on texts past every
    probe string: the properties compare both forms, so the long-prompt class must fail."""
    register_for_test("arrays-drop-on-long-texts", ArraysDropOnLongTexts)
    lines: list[str] = []
    report = verify_model(
        "qwen3",
        backend="arrays-drop-on-long-texts",
        examples=1,
        only={"properties"},
        announce=lines.append,
        progress=False,
    )
    assert report.exit_code == EXIT_MISMATCH
    assert "[long_prompts]" in "\n".join(lines)


def test_verify_exits_1_when_added_tokens_side_by_side_are_wrong(register_for_test):
    """The added-tokens step puts the model's own tokens side by side: a backend wrong only there
    fails it (its accelerated tokenizer has no boot probe of its own, which catches it too)."""
    register_for_test(DropsBetweenAddedTokens.name, DropsBetweenAddedTokens)
    lines: list[str] = []
    report = verify_model(
        "qwen3",
        backend=DropsBetweenAddedTokens.name,
        quick=True,
        only={"added_tokens"},
        announce=lines.append,
        progress=False,
    )
    assert report.exit_code == EXIT_MISMATCH
    step = next(step for step in report.steps if step.name == "added tokens side by side")
    assert step.status == "mismatch" and "ids around added tokens differ" in step.detail, step


def test_verify_exits_1_when_the_fast_path_silently_answers_nothing(monkeypatch, capsys):
    """A planted defect: every encode answered by HF and nothing counted. The ids are right, and
    a gate that only compared ids would pass."""
    monkeypatch.setattr(
        AccelerationState, "answer", lambda self, tokenizer, texts, add_special_tokens, limit, arrays=False: None
    )
    assert cli.main(["verify", "qwen3", "--quick", "--only", "properties", "--no-progress"]) == EXIT_MISMATCH
    assert "answered none" in capsys.readouterr().out


def _assert_the_segments_step_fails(capsys, message: str) -> None:
    """`tokbackend verify qwen3.6 --only segments` exits 1 and says `message`."""
    exit_code = cli.main(["verify", "qwen3.6", "--only", "segments", "--no-progress"])
    output = capsys.readouterr().out
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert message in output


def test_verify_exits_1_when_the_segment_cache_splits_one_character_off(monkeypatch, capsys):
    """A planted defect in the segment cache alone (the first character after an added token
    moves into the piece before it): the backend is right, the conversations step must fail."""
    from tokbackend._segments import AddedTokenSplitter

    def off_by_one(self, text, start=0):
        parts = original(self, text, start)
        for index in range(1, len(parts) - 1):
            before, after = parts[index - 1], parts[index + 1]
            if type(parts[index]) is int and type(before) is str and type(after) is str and len(after) > 1:
                parts[index - 1], parts[index + 1] = before + after[0], after[1:]
        return parts

    original = AddedTokenSplitter.split
    monkeypatch.setattr(AddedTokenSplitter, "split", off_by_one)
    # the build-time check of the cache's premise would turn such a cache off (tested in
    # test_segments.py); here it is off too, so that the conversations step alone must catch it
    monkeypatch.setattr("tokbackend._segments.premise_fails", lambda splitter, hf_ids: None)
    _assert_the_segments_step_fails(capsys, "a conversation differs with the segment cache on")


@pytest.mark.slow  # the segments step's planted defects in CI: one character split off, nothing answered
def test_verify_exits_1_when_the_prefix_memo_drops_an_id(monkeypatch, capsys):
    """A planted defect in the prefix memo alone (the ids it remembers for a request lose their
    last one): every piece is right, the reuse of an earlier turn is not; the step must fail."""
    from tokbackend._segments import SegmentCache

    monkeypatch.setattr(SegmentCache, "remember", memo_one_id_short(SegmentCache.remember))
    _assert_the_segments_step_fails(capsys, "a conversation differs with the segment cache on")


@pytest.mark.slow  # its class in CI: test_segments.py's harness finds the same planted memo
def test_verify_exits_1_when_the_prefix_memo_drops_an_id_of_array_calls_only(monkeypatch, capsys):
    """A planted defect in the memo of calls for arrays alone (SGLang's text prompts; what a call
    for lists remembers stays right): the step asks in both forms, so it must fail."""
    from array import array

    from tokbackend._segments import SegmentCache

    monkeypatch.setattr(SegmentCache, "remember", memo_one_id_short(SegmentCache.remember, only=array))
    _assert_the_segments_step_fails(capsys, "a conversation differs with the segment cache on")


def test_verify_segments_fails_when_the_cache_answers_nothing(monkeypatch, capsys):
    """A planted defect: the cache never hits (every piece encoded afresh, so the ids are right):
    a step the cache took no part in must not pass."""
    from tokbackend._segments import SegmentCache

    monkeypatch.setattr(SegmentCache, "get", lambda self, piece: None)
    _assert_the_segments_step_fails(capsys, "no request was answered from the cache")


@pytest.mark.slow  # its passing run in CI: the quick check above (Qwen3.6, fewer examples)
def test_verify_checks_the_segment_cache_on_conversations(capsys):
    assert cli.main(["verify", "qwen3.6", "--only", "segments", "--no-progress"]) == EXIT_PARTIAL
    assert re.search(
        r"^segment cache\s+ok\s+[\d.]+\s+conversations agree turn by turn", capsys.readouterr().out, re.MULTILINE
    )


def _guard_classes(record: dict) -> dict[tuple[str, ...], list[int]]:
    """The guard's code points grouped by the set of (oracle, family) that found each one."""
    flags: dict[int, set[str]] = {}
    for oracle, families in record["found_by"].items():
        for family, found in families.items():
            for code_point in from_ranges(found):
                flags.setdefault(code_point, set()).add(f"{oracle}:{family}")
    classes: dict[tuple[str, ...], list[int]] = {}
    for code_point, found_by in sorted(flags.items()):
        classes.setdefault(tuple(sorted(found_by)), []).append(code_point)
    return classes


def _qwen36_record() -> dict:
    """The record accelerate() uses for Qwen3.6 with the installed versions."""
    tokenizer_json = tokbackend.load_hf("qwen3.6").backend_tokenizer.to_str()
    record, _ = find_record(record_key(tokenizer_json, "gigatoken"), cache_dir(), guard_versions(("gigatoken",)))
    assert record is not None, "no guard record for Qwen3.6 with the installed versions"
    return record


@pytest.mark.parametrize(
    "guard_class",
    # every other class in CI, all of them in the thorough profile
    [
        pytest.param(flags, marks=() if index % 2 == 0 else pytest.mark.slow)
        for index, flags in enumerate(sorted(_guard_classes(_qwen36_record())))
    ],
    ids=lambda flags: "+".join(flags)[:60],
)
def test_verify_exits_1_on_a_guard_missing_any_one_class(guard_class, monkeypatch, tmp_path, capsys):
    """Remove one class of divergent code points from a correct guard: the scan must name one of them."""
    record = _qwen36_record()
    members = _guard_classes(record)[guard_class]
    trimmed = sorted(from_ranges(record["code_points"]) - set(members))
    write_record({**record, "code_points": [list(pair) for pair in ranges(trimmed)]}, tmp_path)
    monkeypatch.setenv(BAKED_RECORDS_ENV, str(tmp_path))
    sample = members[:: max(1, len(members) // 6)][:6]
    code_points = ",".join(f"U+{code_point:04X}" for code_point in sample + [0x4E00, 0x0416])
    exit_code = cli.main(
        ["verify", "qwen3.6", "--backend", "gigatoken", "--only", "scan", "--code-points", code_points, "--no-progress"]
    )
    output = capsys.readouterr().out
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert "counterexample:" in output
    assert any(f"U+{code_point:04X} in context" in output for code_point in members)


# -- exit 2 and 3 -----------------------------------------------------------------------------


def test_verify_exits_2_with_the_cause_on_a_tokenizer_the_backend_cannot_load(tmp_path):
    hf = tokbackend.load_hf("qwen3.6")  # a TokenizersBackend: reloads its tokenizer.json as saved
    hf.backend_tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    hf.save_pretrained(tmp_path)
    completed = _run_cli("verify", str(tmp_path), "--backend", "gigatoken", "--quick")
    assert completed.returncode == EXIT_UNAVAILABLE
    assert "Lowercase" in completed.stdout
    assert "cannot serve" in completed.stdout


@pytest.mark.parametrize("backend", ["gigatoken", "auto"])
def test_verify_exits_6_when_the_start_up_build_fails(backend, monkeypatch, tmp_path, capsys):
    """Planted: the guard's derivation raises (a pipeline no record covers, and a derivation that
    cannot read its package data). A deployment could not start with this backend."""
    from tokbackend._guard import GuardSettings

    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    finish_without_package_data(monkeypatch)
    unshipped = GuardSettings(shipped_records=tmp_path / "no-shipped-records")
    report = verify_model("qwen3", backend=backend, quick=True, only=set(), guard_settings=unshipped)
    assert report.exit_code == EXIT_UNAVAILABLE
    (load,) = [step for step in report.steps if step.name == "load"]
    assert load.status == "unavailable" and "building its lane failed: FileNotFoundError: planted" in load.detail


def test_verify_exits_3_when_a_grammar_engine_sees_another_vocabulary(monkeypatch, capsys):
    """A planted defect: the accelerated object reports a vocabulary with two ids swapped."""

    def swapped_vocab(self):
        vocab = dict(super(AcceleratedTokenizerMixin, self).get_vocab())
        vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
        return vocab

    monkeypatch.setattr(AcceleratedTokenizerMixin, "get_vocab", swapped_vocab, raising=False)
    exit_code = cli.main(["verify", "qwen3", "--only", "grammar", "--no-progress"])
    output = capsys.readouterr().out
    assert exit_code == EXIT_GRAMMAR, output[-3000:]
    assert "grammar gate FAILED" in output


# -- the whole gate ---------------------------------------------------------------------------


@pytest.mark.slow  # ~4.5 min; each way it can fail is tested in CI on its own
def test_full_verify_on_qwen36_with_scan_and_grammar_gate(tmp_path):
    """The whole gate as a user runs it (every code point, grammar gate), with fewer examples."""
    report_path = tmp_path / "report.json"
    exit_code = cli.main(
        ["verify", "qwen3.6", "--backend", "gigatoken", "--profile", "dev", "--no-progress", "--json", str(report_path)]
    )
    report = json.loads(report_path.read_text())
    assert exit_code == EXIT_OK, [step for step in report["steps"] if step["status"] != "ok"]
    steps = {step["name"]: step for step in report["steps"]}
    assert steps["code-point scan"]["status"] == "ok" and steps["code-point scan"]["data"]["backend_answered"] > 0
    assert steps["code-point scan"]["data"]["raw_divergent"], "the raw backend diverges nowhere: stale guard?"
    assert steps["grammar gate"]["status"] == "ok"


# -- the steps for arguments, results and changes, each failing on its planted defect -----------


def _only(step: str, capsys, model: str = "qwen3") -> tuple[int, str]:
    exit_code = cli.main(["verify", model, "--only", step, "--no-progress"])
    return exit_code, capsys.readouterr().out


@pytest.mark.parametrize(
    "steps",
    # the passing runs in CI: the quick check above (Qwen3.6); the planted defects of both steps
    # run in CI; here with their full counts in -m slow
    [pytest.param("changes", marks=pytest.mark.slow), pytest.param("arguments,changes", marks=pytest.mark.slow)],
)
def test_verify_checks_arguments_results_and_changes(steps, capsys, caplog, monkeypatch, tmp_path):
    """...and keeps what its own changed tokenizers log (a backend that cannot serve one, a guard
    derived for one) out of the user's console, and their guard records out of the user's cache."""
    from tokbackend._loading import resolve_model

    model = resolve_model("qwen3")  # built in the real cache; the run's own cache is empty
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="tokbackend"):
        exit_code, output = _only(steps, capsys, model)
    assert not [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert not list(tmp_path.glob("guards/*.json"))
    assert "; HF serves 1 of them, which the backend cannot (why: --json)" in output, output[-3000:]  # NFKC
    assert exit_code == EXIT_PARTIAL, output[-3000:]
    if "arguments" in steps:
        assert re.search(r"^arguments and results\s+ok", output, re.MULTILINE)
    assert re.search(r"^changes after acceleration\s+ok", output, re.MULTILINE)


def test_verify_exits_1_when_the_fast_path_answers_a_call_hf_rejects(monkeypatch, capsys):
    """A planted defect: the policy no longer asks whether add_special_tokens is a bool."""
    from tokbackend import _policy as policy

    real = policy.fast_path_reason
    monkeypatch.setattr(
        "tokbackend._tokenizer.fast_path_reason",
        lambda text, pair, add_special_tokens, kwargs, defaults: real(text, pair, True, kwargs, defaults),
    )
    exit_code, output = _only("arguments", capsys)
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert "a call differs from HF's" in output


def test_verify_exits_1_when_a_fast_result_is_poorer_than_hfs(monkeypatch, capsys):
    """A planted defect: fast-path results without Encodings (a plain BatchEncoding)."""
    from transformers.tokenization_utils_base import BatchEncoding

    import tokbackend._tokenizer

    monkeypatch.setattr(tokbackend._tokenizer, "lazy_batch_encoding", lambda data, compute: BatchEncoding(data))
    exit_code, output = _only("arguments", capsys)
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert "differs from HF" in output


def test_verify_exits_1_when_a_change_after_acceleration_is_missed(monkeypatch, capsys):
    """A planted defect: a per-call check that never sees a change."""
    from tokbackend._tokenizer import HFReference

    monkeypatch.setattr(HFReference, "fingerprint", lambda self: "never changes")
    exit_code, output = _only("changes", capsys)
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    assert re.search(r"^changes after acceleration\s+mismatch", output, re.MULTILINE)


# -- the exit codes: one meaning each ----------------------------------------------------------


def test_usage_errors_exit_2_and_partial_runs_exit_7(capsys):
    with pytest.raises(SystemExit) as unknown_step:
        cli.main(["verify", "qwen3", "--only", "scan,nothing"])
    assert unknown_step.value.code == EXIT_USAGE
    error = capsys.readouterr().err
    # the usage of `verify`, not the top-level one, naming the bad step and every valid one
    assert error.startswith("usage: tokbackend verify ") and "{verify,guard,sglang-gate}" not in error
    assert f"argument --only: unknown step(s) nothing; known: {', '.join(STEPS)}" in error
    with pytest.raises(SystemExit) as unknown_option:
        cli.main(["verify", "qwen3", "--no-such-option"])
    assert unknown_option.value.code == EXIT_USAGE
    for bad, why in (
        ("U+ZZZZ", "not code point ranges"),
        ("U+0100..U+00FF", "not code point ranges"),
        ("U+D800", "no code"),
    ):
        with pytest.raises(SystemExit) as bad_code_points:  # a usage error naming the value, not a traceback
            cli.main(["verify", "qwen3", "--only", "scan", "--code-points", bad])
        assert bad_code_points.value.code == EXIT_USAGE
        error = capsys.readouterr().err
        assert (
            error.startswith("usage: tokbackend verify ")
            and f"argument --code-points: {why}" in error
            and repr(bad) in error
        )
    assert len({EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_GRAMMAR, EXIT_UNAVAILABLE, EXIT_PARTIAL}) == 6


@pytest.mark.slow  # its passing run in CI: the quick check above (Qwen3.6, fewer examples)
def test_verify_checks_threads_state_warnings_and_results(capsys):
    exit_code, output = _only("sharing", capsys)
    assert exit_code == EXIT_PARTIAL, output[-3000:]
    assert re.search(r"^threads, state, warnings, results\s+ok", output, re.MULTILINE)


@pytest.mark.parametrize(
    ("plant", "failing"),
    [
        (
            lambda mp: mp.setattr("tokbackend._tokenizer.gate_of", lambda rust, owner: RestoresWithoutWaiting()),
            "threads",
        ),
        (lambda mp: mp.setattr("tokbackend._tokenizer.gate_of", lambda rust, owner: ForgetsAnswers()), "state"),
        # CI runs the first two classes, the slow profile all four
        pytest.param(
            lambda mp: mp.setattr(HFReference, "_internal", internal_calls_warn), "warnings", marks=pytest.mark.slow
        ),
        pytest.param(
            lambda mp: mp.setattr(HFReference, "hf_encodings", encodings_of_the_current_state),
            "results",
            marks=pytest.mark.slow,
        ),
    ],
    ids=["internal-calls-race", "answers-forgotten", "internal-calls-warn", "encodings-of-now"],
)
def test_verify_exits_1_on_each_sharing_defect(monkeypatch, capsys, plant, failing):
    """Each property of the sharing step fails on a defect of its own class (and the ones
    before it pass: the step reports the first that fails)."""
    plant(monkeypatch)
    exit_code, output = _only("sharing", capsys)
    assert exit_code == EXIT_MISMATCH, output[-3000:]
    line = rf"^threads, state, warnings, results\s+mismatch\s+[\d.]+\s+{failing}:"
    assert re.search(line, output, re.MULTILINE), output[-3000:]
