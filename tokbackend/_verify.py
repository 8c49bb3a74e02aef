"""`verify_model`: the pre-deploy gate behind `tokbackend verify <model>`.

Each step compares the accelerated tokenizer's answers with HF's, exceptions included; an error of
verify's own inside a step is that step's `error` (exit 8: no verdict), never read as a mismatch.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import logging
import os
import platform
import statistics
import tempfile
import time
import traceback
import typing
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tokbackend._options import DEFAULT_BACKEND
from tokbackend._wording import counted
from tokbackend.backends._base import BatchEncoder, is_error

if TYPE_CHECKING:
    from hypothesis import settings
    from transformers import PreTrainedTokenizerBase as Tokenizer

    from tokbackend._guard import GuardSettings
    from tokbackend._routing.lanes import Lane

Announce = Callable[[str], None]
EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_GRAMMAR, EXIT_NOT_FOUND, EXIT_MISSING_TOOLS = 0, 1, 2, 3, 4, 5
EXIT_UNAVAILABLE, EXIT_PARTIAL, EXIT_HARNESS = 6, 7, 8
# `tokbackend verify --help` prints this table; docs/verify.md holds it word for word.
EXIT_CODES: Mapping[int, str] = MappingProxyType(
    {
        EXIT_OK: "the backend is exact and usable for this model: every step ran and passed (or a passing `--quick`, "
        "whose verdict names what it skipped)",
        EXIT_MISMATCH: "a mismatch was found (minimal counterexamples are printed), or the fast path answered none of "
        "a step's inputs",
        EXIT_USAGE: "usage error: an unknown option, or an unknown step in `--only`",
        EXIT_GRAMMAR: "the grammar gate failed",
        EXIT_NOT_FOUND: "the model was not found locally (the message says how to put it into the cache)",
        EXIT_MISSING_TOOLS: "a tool verify needs is not installed "
        "(the message names the extra: `pip install 'tokbackend[verify]'`)",
        EXIT_UNAVAILABLE: "the model cannot be served: the backend cannot serve it (the reason is printed), or "
        "HuggingFace cannot load its files (the file and the cause are printed)",
        EXIT_PARTIAL: "every step that ran passed, but some were skipped (`--only`, a missing tool): not a full "
        "verification",
        EXIT_HARNESS: "no verdict: a step stopped on an error before it could compare answers (an error of verify's "
        "harness; the step and the error are printed, the traceback is in the `--json` report): not a mismatch, "
        "not a pass",
    }
)
# Where a run has several outcomes, it exits with the first of these that applies.
EXIT_PRECEDENCE = (EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_MISMATCH, EXIT_GRAMMAR, EXIT_HARNESS, EXIT_PARTIAL)
# The exit code each step status stands for ("ok", "info" and "skipped" stand for none).
STATUS_EXIT = MappingProxyType(
    {
        "not_found": EXIT_NOT_FOUND,
        "unloadable": EXIT_UNAVAILABLE,
        "unavailable": EXIT_UNAVAILABLE,
        "mismatch": EXIT_MISMATCH,
        "grammar": EXIT_GRAMMAR,
        "error": EXIT_HARNESS,
    }
)
# The steps after load and boot probe (the names `--only` takes): step KEY runs `_KEY` below.
STEP_TITLES = MappingProxyType(
    {
        "scan": "code-point scan",
        "properties": "hypothesis properties",
        "added_tokens": "added tokens side by side",
        "arguments": "arguments and results",
        "changes": "changes after acceleration",
        "sharing": "threads, state, warnings, results",
        "segments": "segment cache",
        "chat": "chat template",
        "grammar": "grammar gate",
        "speed": "speed",
    }
)
STEPS = tuple(STEP_TITLES)
# What `quick` leaves out, and those steps' detail: a quick check that passes exits 0.
QUICK_SKIPS = ("scan", "changes", "grammar")
QUICK_DETAIL = "--quick"


@dataclasses.dataclass
class StepResult:
    """One step's outcome: `status` is "ok", "info", "skipped", or one of `STATUS_EXIT`."""

    name: str
    status: str
    detail: str
    seconds: float
    data: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class VerifyReport:
    """A run's steps, and what was checked: each concrete backend serving the model (for "auto",
    the one it chose) with its libraries' versions and guard record, certified only on exit 0."""

    model: str
    backend: str
    steps: list[StepResult]
    checked: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def exit_code(self) -> int:
        codes = {STATUS_EXIT[step.status] for step in self.steps if step.status in STATUS_EXIT}
        if any(step.status == "skipped" and step.detail != QUICK_DETAIL for step in self.steps):
            codes.add(EXIT_PARTIAL)
        return next((code for code in EXIT_PRECEDENCE if code in codes), EXIT_OK)

    def as_json(self) -> dict[str, Any]:
        """The `--json` report; `certified` (what a deploy may serve) only where the run exits 0."""
        load = next((step for step in self.steps if step.name == "load"), None)
        exit_code = self.exit_code
        return {
            "model": self.model,
            "backend": self.backend,
            "exit_code": exit_code,
            "verdict": verdict(self),
            "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "versions": library_versions(),
            "guard_record": None if load is None else load.data.get("guard_record"),
            "checked": self.checked,
            **({"certified": self.checked} if exit_code == EXIT_OK else {}),
            "host": {
                "hostname": platform.node(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            },
            "steps": [dataclasses.asdict(step) for step in self.steps],
        }


def library_versions() -> dict[str, str | None]:
    """Versions (None: not installed) of every library a verify result depends on."""
    from importlib.metadata import PackageNotFoundError, version

    from tokbackend.backends import available_backends, versioned_libraries

    engines = ["tokbackend", "tokenizers", "transformers", *versioned_libraries(available_backends())]
    versions: dict[str, str | None] = dict.fromkeys([*engines, "xgrammar", "hypothesis"])
    for library in versions:
        with contextlib.suppress(PackageNotFoundError):
            versions[library] = version(library)
    return versions


def _first_line(error: BaseException) -> str:
    """'ValueError: the message's first line' (the class alone for an empty message)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


# A step's status, detail and data (`StepResult`'s, less its name and time).
Outcome = tuple[str, str, dict[str, Any]]


def _result(status: str, detail: str, **data: Any) -> Outcome:
    return status, detail, data


def _step(report: VerifyReport, name: str, announce: Announce, body: Callable[[], Outcome]) -> str:
    """Time one step, append its result and return its status; an error escaping it is status "error"."""
    started = time.perf_counter()
    announce(f"== {name}")
    try:
        status, detail, data = body()
    except BaseException as error:
        if not is_error(error):
            raise
        status, data = "error", {"traceback": traceback.format_exc()}
        stopped = f"stopped on {_first_line(error)} before it could compare answers"
        detail = f"{stopped} (no verdict on this step; the traceback is in --json)"
    report.steps.append(StepResult(name, status, detail, round(time.perf_counter() - started, 2), data))
    announce(f"   {status}: {detail}")
    return status


@dataclasses.dataclass
class _Run:
    """Verify's options, then what load makes: HF's tokenizer, the lane, and the lane on its own."""

    model: str
    backend: str
    guard_config: GuardSettings
    profile: str
    examples: int | None
    seed: int
    quick: bool
    progress: bool
    code_points: list[int] | None
    announce: Announce
    hf: Tokenizer = dataclasses.field(init=False)
    accelerated: Tokenizer = dataclasses.field(init=False)
    lane: Lane = dataclasses.field(init=False)

    def accelerate(self, tokenizer: Tokenizer, **options: Any) -> Tokenizer:
        """Another accelerated tokenizer on the verified lane, with verify's guard settings."""
        from tokbackend._tokenizer import accelerate

        return accelerate(tokenizer, backend=self.lane.name, guard=self.guard_config, **options)

    def hypothesis_settings(self) -> settings:
        """The profile, capped by --examples and --quick, random where a seed is given."""
        from hypothesis import settings

        base = settings.get_profile(self.profile)
        if self.examples is not None:
            base = settings(base, max_examples=self.examples)
        if self.quick:
            base = settings(base, max_examples=min(base.max_examples, 10))
        return settings(base, derandomize=False) if self.seed else base

    def added_tokens(self) -> list[str]:
        """The tokenizer's added tokens, which the strategies plant inside texts."""
        return [str(token) for token in self.hf.added_tokens_decoder.values()]

    def bar(self, total: int, unit: str) -> Any:
        """A progress bar, which shows nothing with --no-progress."""
        from tqdm import tqdm

        return tqdm(total=total, unit=f" {unit}", leave=False, disable=not self.progress)


def _fast_texts(tokenizer: Tokenizer) -> int:
    """How many texts the fast path has answered for `tokenizer`."""
    return int(tokenizer.tokbackend.stats()["fast_texts"])


def _passed(answered: int, inputs: str, detail: str, **data: Any) -> Outcome:
    """ "ok" with `detail`, unless the fast path answered none of `inputs` (then it proves nothing)."""
    if answered == 0:
        return _result("mismatch", f"the fast path answered none of {inputs}: this step proves nothing", **data)
    return _result("ok", detail, **data)


def _mismatch(run: _Run, detail: str, shown: str, **data: Any) -> Outcome:
    """ "mismatch" with `detail`; `shown` (the counterexample, in full) is printed as it is found."""
    run.announce(shown)
    return _result("mismatch", detail, **data)


def verify_model(
    model: str,
    backend: str = DEFAULT_BACKEND,
    profile: str = "ci",
    examples: int | None = None,
    seed: int = 0,
    quick: bool = False,
    announce: Announce = print,
    progress: bool = True,
    code_points: list[int] | None = None,
    only: set[str] | None = None,
    guard_settings: GuardSettings | None = None,
) -> VerifyReport:
    """Run the gate for `model` (built-in name, local directory, or hub id in the local cache).

    backend: a backend name ("auto", "gigatoken", ...) or a server flag's value
        ("tokbackend-auto"), which verifies the lane that flag serves.
    code_points: scan only these (default: every code point, see `tokbackend._guard.derive`).
    only: run only these of the steps after load and boot probe (`STEPS`); the others are
        reported as skipped.
    guard_settings: the `GuardSettings` of every build verify makes (default: accelerate()'s).
    """
    from tokbackend._guard import GuardSettings
    from tokbackend._routing.names import backend_for_flag

    backend = backend_for_flag(backend) or backend
    guard_config = guard_settings if guard_settings is not None else GuardSettings()
    run = _Run(model, backend, guard_config, profile, examples, seed, quick, progress, code_points, announce)
    report = VerifyReport(model, backend, [])
    if _step(report, "load", announce, lambda: _load(run, report)) != "ok":
        return report  # nothing to verify
    _step(report, "boot probe", announce, lambda: _probe(run))
    for key, title in STEP_TITLES.items():
        if quick and key in QUICK_SKIPS:
            report.steps.append(StepResult(title, "skipped", QUICK_DETAIL, 0.0))
        elif only is not None and key not in only:
            report.steps.append(StepResult(title, "skipped", "not in --only", 0.0))
        else:  # looked up on each run, so that a test may replace a step
            _step(report, title, announce, lambda: globals()[f"_{key}"](run))  # noqa: B023 - called at once
            _release_memory()
    return report


def _load(run: _Run, report: VerifyReport) -> Outcome:
    """HF's tokenizer, the deployed backend and its lane on its own (into `run`); `report.checked`."""
    import tokbackend
    from tokbackend._build import FastPathError
    from tokbackend._guard import GuardUnavailableError, guard_versions
    from tokbackend._loading import ModelFilesError
    from tokbackend.backends import BackendUnavailableError, backend_class

    model, backend = run.model, run.backend
    try:
        hf = run.hf = tokbackend.load_hf(model)
    except tokbackend.ModelNotFoundError as error:
        return _result("not_found", error.cli_message)
    except ModelFilesError as error:
        return _result("unloadable", str(error).removeprefix("tokbackend: "))
    except Exception as error:  # noqa: BLE001 - whatever HF raises is why it cannot load the model
        return _result("unloadable", f"HuggingFace cannot load {model!r}: {_first_line(error)}")
    try:
        # The backend a deployment gets (a named one failing the probe is verified all the same) ...
        deployed = tokbackend.accelerate(hf, backend=backend, guard=run.guard_config)
        if deployed.tokbackend.routing is None:
            return _result(
                "unavailable", f"backend {backend!r} cannot serve {model}: {deployed.tokbackend.disabled_reason}"
            )
        lane = run.lane = deployed.tokbackend.routing.lane
        # ... then on its own: no probe as a safety net, no segment cache (it has its own step).
        run.accelerated = run.accelerate(hf, probe=False, segment_cache_mib=None)
    except BaseException as error:
        if not is_error(error):
            raise
        if isinstance(error, (BackendUnavailableError, GuardUnavailableError, FastPathError)):
            return _result("unavailable", str(error).removeprefix("tokbackend: "))
        return _result("unavailable", f"backend {backend!r} cannot serve {model}: {_first_line(error)}")
    guard = run.accelerated.tokbackend.guard
    versions = guard_versions(tuple(backend_class(lane.name).versioned_libraries))
    report.checked = [{"backend": lane.name, "versions": versions, "guard": lane.guard.source()}]
    chose = "" if lane.name == backend else f" (auto chose {lane.name}: {deployed.tokbackend.routing.reason})"
    loaded = f"{type(hf).__name__}, {counted(len(hf), 'token')}, backend {lane.name!r} loaded{chose}"
    return _result(
        "ok",
        f"{loaded}; Unicode guard: {guard.describe()}",
        guard=guard.by_class(),
        guard_code_points=len(guard.code_points),
        guard_record=guard.record.get("path"),
    )


def _probe(run: _Run) -> Outcome:
    """The boot probe's edge strings, the lane's backend against HF."""
    from tokbackend._probe import first_difference, run_probe
    from tokbackend._tokenizer import AcceleratedTokenizerMixin, reference_of

    accelerated = typing.cast(AcceleratedTokenizerMixin, run.accelerated)
    state = run.accelerated.tokbackend
    result = run_probe(state.backend, reference_of(accelerated), state.guard, state.build.pieces_of)
    if (mismatch := result.mismatch) is None:
        return _result("ok", f"{counted(result.strings, 'edge string')} agree ({result.seconds * 1000:.1f} ms)")
    detail = f"{mismatch.text!r}: backend {mismatch.backend_ids[:12]} vs HF {mismatch.hf_ids[:12]}"
    index = first_difference(mismatch.backend_ids, mismatch.hf_ids)
    return _result("mismatch", f"edge string differs at index {index}: {detail}")


def _release_memory() -> None:
    """Free a step's tokenizer copies (reference cycles) and trim what glibc keeps resident."""
    import gc

    from tokbackend._process.memory import release_freed_memory

    gc.collect()
    release_freed_memory()


def _copy(tokenizer: Tokenizer) -> Tokenizer:
    """A deep copy sharing the large vocabulary and merges, which no step changes."""
    kept = {
        id(value): value
        for value in vars(tokenizer).values()
        if isinstance(value, (dict, list)) and len(value) > 10_000
    }
    return copy.deepcopy(tokenizer, kept)


def _scan(run: _Run) -> Outcome:
    """Every code point in every derived context, raw backend and accelerated tokenizer against HF."""
    from tokbackend._guard.contexts import derive_contexts
    from tokbackend._guard.derive import code_points_to_scan
    from tokbackend._guard.scan import scan
    from tokbackend.backends import reference_backend

    accelerated = run.accelerated
    tokenizer_json = run.hf.backend_tokenizer.to_str()
    reference = reference_backend()
    hf_batch = reference(tokenizer_json, reference.Options()).encode_batch
    before = _fast_texts(accelerated)

    def accelerated_batch(texts: list[str]) -> list[list[int]]:
        ids: list[list[int]] = accelerated(texts, add_special_tokens=False)["input_ids"]
        return ids

    candidates: dict[str, BatchEncoder] = {
        "raw": accelerated.tokbackend.backend.encode_batch,
        "accelerated": accelerated_batch,
    }
    contexts = derive_contexts(tokenizer_json)
    code_points = run.code_points if run.code_points is not None else code_points_to_scan(hf_batch, candidates)
    with run.bar(len(contexts), "contexts") as bar:
        results = scan(hf_batch, candidates, contexts, code_points, progress=lambda _: bar.update())
    raw, ours = results["raw"], results["accelerated"]
    answered = _fast_texts(accelerated) - before
    detail = f"accelerated: {ours.summary()}; raw backend: {raw.summary()}; backend answered {answered} texts"
    data = {
        "raw_divergent": raw.all_divergent,
        "accelerated_divergent": ours.all_divergent,
        "backend_answered": answered,
    }
    if (example := ours.example()) is not None:
        template, code_point = example
        text = template.format(chr(code_point))
        expected, actual = hf_batch([text])[0], accelerated_batch([text])[0]
        where = f"{text!r} (U+{code_point:04X} in context {template!r})"
        shown = f"counterexample: {where}: HF {expected}, accelerated {actual}"
        return _mismatch(run, detail, shown, counterexample=text, **data)
    return _passed(answered, "the scan's texts", detail, **data)


def _properties(run: _Run) -> Outcome:
    """Each input class of `tokbackend.equivalence.strategies`, ids in list and array form, against HF."""
    from hypothesis import Phase, settings

    from tokbackend.equivalence.differential import find_mismatch, in_every_form
    from tokbackend.equivalence.strategies import input_classes

    base = run.hypothesis_settings()
    classes = input_classes(run.added_tokens())
    if run.quick:
        classes.pop("long_prompts")
    before = _fast_texts(run.accelerated)
    mismatches = []
    with run.bar(len(classes), "input classes") as bar:
        for name, strategy in classes.items():
            # A handful of long prompts proves the point; shrinking one takes minutes of HF calls.
            class_settings = base
            if name == "long_prompts":
                unshrunk = [phase for phase in base.phases if phase is not Phase.shrink]
                class_settings = settings(base, max_examples=min(base.max_examples, 5), phases=unshrunk)
            encode = in_every_form(run.accelerated)
            mismatch = find_mismatch(run.hf.encode, encode, strategy(), name, class_settings, run.seed or None)
            if mismatch is not None:
                mismatches.append(mismatch.report())
                run.announce(mismatch.report())
            bar.update()
    answered = _fast_texts(run.accelerated) - before
    if mismatches:
        return _result(
            "mismatch", f"{len(mismatches)} of {len(classes)} input classes disagree", counterexamples=mismatches
        )
    agree = f"{len(classes)} input classes agree (up to {base.max_examples} examples each, profile {run.profile!r})"
    return _passed(answered, "the examples", f"{agree}; backend answered {answered} texts", backend_answered=answered)


def _added_tokens(run: _Run) -> Outcome:
    """The model's added tokens side by side, overlapping, cut short and amid text, in every call form."""
    import random

    from tokbackend._probe import side_by_side
    from tokbackend.equivalence.added_tokens import call_forms, random_text
    from tokbackend.equivalence.differential import answer_of

    tokens = sorted(run.added_tokens())
    if not tokens:
        return _result("info", "not applicable: the tokenizer has no added tokens")
    rng = random.Random(run.seed)
    texts = side_by_side(tokens) + [random_text(rng, tokens) for _ in range(run.hypothesis_settings().max_examples)]
    before = _fast_texts(run.accelerated)
    ours, theirs = call_forms(run.accelerated), call_forms(run.hf)
    for start in range(0, len(texts), 8):
        batch = texts[start : start + 8]
        for form, call in ours.items():
            got, expected = answer_of(call, batch), answer_of(theirs[form], batch)
            if got != expected:
                shown = next((text for text, one, other in zip(batch, got, expected) if one != other), batch)
                detail = f"{form} of {shown!r}: ours {str(got)[:100]}, HF's {str(expected)[:100]}"
                return _result("mismatch", f"ids around added tokens differ: {detail}", counterexamples=[detail])
    detail = (
        f"{counted(len(texts), 'text')} around the model's {counted(len(tokens), 'added token')} agree in "
        f"{len(ours)} call forms"
    )
    return _passed(_fast_texts(run.accelerated) - before, "the texts", detail)


def _arguments(run: _Run) -> Outcome:
    """Calls with keyword arguments HF's checks distinguish (same result or exception class), and
    the result objects' surface on plain calls, as HF's."""
    from hypothesis import settings

    from tokbackend.equivalence.arguments import calls, outcome
    from tokbackend.equivalence.differential import Mismatch, find_mismatch
    from tokbackend.equivalence.surface import surface

    hf, accelerated = run.hf, run.accelerated
    search: Callable[..., Mismatch | None] = find_mismatch  # its inputs are typed as texts; calls compare alike
    before = _fast_texts(accelerated)
    base = run.hypothesis_settings()
    base = settings(base, max_examples=base.max_examples * 4, derandomize=not run.seed)
    mismatch = search(
        lambda call: list(outcome(hf, call)),
        lambda call: list(outcome(accelerated, call)),
        calls(run.added_tokens()),
        "calls",
        base,
        run.seed or None,
    )
    if mismatch is not None:
        shown = mismatch.report()
        return _mismatch(run, f"a call differs from HF's: {mismatch.text!r}", shown, counterexamples=[shown])
    texts = ["Hello, world!", "x <|im_end|> y " + "\u4e2d\u6587 " * 5, ""]
    plain_calls = {"one text": texts[0], "a batch": texts, "an empty text": texts[2]}
    for name, text in plain_calls.items():
        ours, theirs = surface(accelerated(text)), surface(hf(text))
        if ours != theirs:
            differing = sorted(key for key in theirs if ours.get(key) != theirs[key])
            return _result("mismatch", f"the result of {name} differs from HF's in {', '.join(differing[:6])}")
    answered = _fast_texts(accelerated) - before
    detail = (
        f"calls with valid and invalid arguments agree (up to {base.max_examples} examples: ids or exception class); "
        f"result objects equal HF's on {len(plain_calls)} calls; backend answered {answered} texts"
    )
    return _passed(answered, "the calls", detail, backend_answered=answered)


def _changes(run: _Run) -> Outcome:
    """Each change of `tokbackend.equivalence.changes` to an accelerated copy (through it and through the plain
    tokenizer sharing its state): every text of the change then encodes as HF."""
    from tokbackend.equivalence.changes import CHANGES, texts_for
    from tokbackend.equivalence.differential import answer_of

    template = run.accelerate(run.hf)
    answered = 0
    # These rebuilds are verify's own: their logs go into the result, their guard records to scratch.
    with _kept_aside() as logs:
        for index, change in enumerate(CHANGES):
            accelerated = _copy(template)
            original = accelerated._tokbackend_plain_copy()  # the HF object, sharing its Rust tokenizer
            texts = texts_for(change, original)
            change.apply(original if index % 2 == 0 else accelerated)
            before = _fast_texts(accelerated)
            for text in texts:
                expected, actual = answer_of(original.encode, text), answer_of(accelerated.encode, text)
                if actual != expected:
                    detail = f"after {change.name}, {text!r} differs from HF's ids"
                    shown = f"after {change.name}: {text!r}: HF {str(expected)[:80]}, accelerated {str(actual)[:80]}"
                    return _mismatch(run, detail, shown, counterexample=text, logs=logs)
            answered += _fast_texts(accelerated) - before
            del accelerated, original
            _release_memory()
    turned_off = sum(1 for line in logs if line.startswith("ERROR"))
    detail = f"{len(CHANGES)} kinds of change seen on the next call; backend answered {answered} texts"
    if turned_off:
        detail += f"; HF serves {turned_off} of them, which the backend cannot (why: --json)"
    return _passed(answered, "the texts after any change", detail, logs=logs)


@contextlib.contextmanager
def _kept_aside() -> Iterator[list[str]]:
    """Meanwhile, tokbackend's log lines kept in the list yielded, its cache directory temporary."""
    from tokbackend._cache_dir import CACHE_DIR_ENV

    logger = logging.getLogger("tokbackend")
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{record.levelname} {record.getMessage()}")

    with tempfile.TemporaryDirectory(prefix="tokbackend-verify-") as scratch:
        handler, propagate, previous = Keep(), logger.propagate, os.environ.get(CACHE_DIR_ENV)
        logger.addHandler(handler)
        logger.propagate, os.environ[CACHE_DIR_ENV] = False, scratch
        try:
            yield lines
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate
            if previous is None:
                del os.environ[CACHE_DIR_ENV]
            else:
                os.environ[CACHE_DIR_ENV] = previous


def _sharing(run: _Run) -> Outcome:
    """What a tokenizer shares beyond ids (`tokbackend.equivalence.sharing`), each on a fresh pair of copies."""
    from tokbackend.equivalence.sharing import (
        length_warnings,
        result_operations,
        settings_left,
        threads_with_truncation,
    )

    # any guarded code point: the guard hands a text holding it to HF (an internal call)
    guard = run.accelerated.tokbackend.guard
    printable = sorted(code_point for code_point in guard.code_points if chr(code_point).isprintable())
    guarded = f"a {chr(printable[0])} b" if printable else "a b"
    checks: dict[str, Callable[[Tokenizer, Tokenizer], str | None]] = {
        "threads": lambda hf, accelerated: threads_with_truncation(hf, accelerated, guarded),
        "state": lambda hf, accelerated: settings_left(hf, accelerated, guarded),
        "warnings": lambda hf, accelerated: length_warnings(hf, accelerated, guarded),
        "results": result_operations,
    }
    for name, check in checks.items():
        failure = check(_copy(run.hf), run.accelerate(_copy(run.hf)))
        if failure is not None:
            return _mismatch(run, f"{name}: {failure}", f"{name}: {failure}", counterexample=failure)
        _release_memory()
    hand_over = f"beside texts holding {guarded[2]!r} (guarded)" if printable else "(no guarded code point)"
    return _result(
        "ok", f"threads truncating every call {hand_over}, Rust settings and saved file, warnings, results: as HF's"
    )


def _segments(run: _Run) -> Outcome:
    """Conversations encoded turn by turn, in list and array form, with the segment cache on, as HF."""
    from tokbackend.equivalence.conversations import conversations, guarded_sample, turn_by_turn
    from tokbackend.equivalence.differential import find_mismatch, in_every_form

    cached = run.accelerate(run.hf, probe=False, segment_cache_steps_aside=False)
    cache_stats = cached.tokbackend.stats()["segment_cache"]
    if not cache_stats["enabled"]:
        return _result(
            "info", f"not used for this model ({cache_stats.get('unsupported')}); every request is encoded whole"
        )
    base, added = run.hypothesis_settings(), run.added_tokens()
    strategy = conversations(added, guarded_sample(cached.tokbackend.guard.code_points))
    encode_hf, encode_cached = turn_by_turn(run.hf.encode, added), turn_by_turn(in_every_form(cached), added)
    mismatch = find_mismatch(encode_hf, encode_cached, strategy, "conversations", base, run.seed or None)
    cache_stats = cached.tokbackend.stats()["segment_cache"]
    hits, prefix_hits = cache_stats["hits"], cache_stats["prefix_hits"]
    if mismatch is not None:
        shown = mismatch.report()
        return _mismatch(run, "a conversation differs with the segment cache on", shown, counterexamples=[shown])
    if hits == 0:
        return _result(
            "mismatch", "no request was answered from the cache: a gate the cache took no part in proves nothing"
        )
    agree = f"conversations agree turn by turn (up to {base.max_examples} examples)"
    detail = f"{agree}; cache hits {hits}, remembered-prefix hits {prefix_hits}"
    return _result("ok", detail, hits=hits, prefix_hits=prefix_hits)


def _chat(run: _Run) -> Outcome:
    """Conversations rendered and encoded by the chat template, as HF's."""
    from tokbackend.equivalence.differential import answer_of

    if not getattr(run.hf, "chat_template", None):
        return _result("info", "not applicable: the tokenizer has no chat template")
    conversations = [
        [{"role": "user", "content": "Hello 世界 <think>x</think> 🦊"}],
        [
            {"role": "system", "content": "You are a careful agent.\n\n" + "tool output: {'a': [1, 2, 3]}\n" * 20},
            {"role": "user", "content": "Résumé: e\u0301 1\ufe0f\u20e3 \t\r\n مرحبا"},
            {"role": "assistant", "content": '<tool_call>{"name": "f"}</tool_call>'},
        ],
    ]
    options = {"tokenize": True, "add_generation_prompt": True, "return_dict": False}
    for messages in conversations:
        ours = answer_of(run.accelerated.apply_chat_template, messages, **options)
        theirs = answer_of(run.hf.apply_chat_template, messages, **options)
        if ours != theirs:
            return _result(
                "mismatch", f"chat template ids differ for {messages!r}: ours {str(ours)[:80]}, HF's {str(theirs)[:80]}"
            )
    return _result("ok", f"{counted(len(conversations), 'conversation')} render and encode identically")


def _grammar(run: _Run) -> Outcome:
    """xgrammar's view of the accelerated tokenizer and its constrained generations, as HF's."""
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        return _result("skipped", "xgrammar is not installed (pip install 'tokbackend[verify]'); grammar gate NOT run")
    from tokbackend.equivalence.grammar import grammar_gate

    try:
        result = grammar_gate(run.accelerated, run.hf)
    except Exception as error:
        return _result("grammar", f"xgrammar cannot use the accelerated tokenizer: {type(error).__name__}: {error}")
    if not result.passed:
        return _result("grammar", "; ".join(result.differences + result.failures))
    generations = counted(len(result.generations), "schema-constrained generation")
    alike = counted(len(result.alike), "generation")
    alike = (
        f"; {alike} fail with HF's own tokenizer alike (xgrammar's, not the backend's: --json)" if result.alike else ""
    )
    return _result("ok", f"TokenizerInfo equals HF's; {generations} as HF's{alike}", alike=result.alike)


def _speed(run: _Run) -> Outcome:
    """The median time of a 32k-token prompt, HF against accelerated (information only)."""
    from tokbackend.equivalence.corpus import prompt_of_tokens

    counter = run.hf.backend_tokenizer
    prompts = [
        prompt_of_tokens(lambda text: len(counter.encode(text).ids), 424242 + index, 32000) for index in range(6)
    ]
    times: tuple[list[float], list[float]] = ([], [])
    for index, prompt in enumerate(prompts):  # HF and accelerated in turn, so that a change in load falls on both
        encode = (run.hf.encode, run.accelerated.encode)[index % 2]
        started = time.perf_counter()
        encode(prompt)
        times[index % 2].append(time.perf_counter() - started)
    hf_ms, fast_ms = (statistics.median(side) * 1000 for side in times)
    detail = f"32k-token prompt: HF {hf_ms:.1f} ms, accelerated {fast_ms:.2f} ms ({hf_ms / fast_ms:.1f}x)"
    return _result("info", detail, hf_ms=hf_ms, accelerated_ms=fast_ms)


def summary_table(report: VerifyReport) -> str:
    """The closing table: one row per step, skipped steps included, then the verdict."""
    width = max(len(step.name) for step in report.steps)
    rows = [f"{'step'.ljust(width)}  status       seconds  detail"]
    for step in report.steps:
        lines = step.detail.splitlines() or [""]
        detail = lines[0] if len(lines[0]) <= 110 and len(lines) == 1 else lines[0][:109] + "…"
        rows.append(f"{step.name.ljust(width)}  {step.status.ljust(11)}  {step.seconds:7.2f}  {detail}")
    names = [
        f"{entry['backend']} ({', '.join(f'{lib} {value}' for lib, value in entry['versions'].items())})"
        for entry in report.checked
    ]
    served = f"{report.backend} -> {', '.join(names)}" if names else report.backend
    served = names[0] if names and report.backend == report.checked[0]["backend"] else served
    rows.append(f"result: {verdict(report)} (model {report.model}, backend {served}, exit {report.exit_code})")
    return "\n".join(rows)


def verdict(report: VerifyReport) -> str:
    """One line: what the exit code means for this run, naming what was not checked."""
    exit_code = report.exit_code
    if exit_code == EXIT_UNAVAILABLE and any(step.status == "unloadable" for step in report.steps):
        return "HuggingFace cannot load this model's files"
    if exit_code == EXIT_HARNESS:
        failed = "; ".join(step.name for step in report.steps if step.status == "error")
        return f"NO VERDICT: {failed} stopped on an error before comparing (not a mismatch, not a pass)"
    if exit_code not in (EXIT_OK, EXIT_PARTIAL):
        return {
            EXIT_MISMATCH: "MISMATCH: do not deploy",
            EXIT_UNAVAILABLE: "backend cannot serve this model",
            EXIT_GRAMMAR: "grammar gate FAILED",
            EXIT_NOT_FOUND: "model not found locally",
        }[exit_code]
    skipped = "; ".join(step.name for step in report.steps if step.status == "skipped")
    if not skipped:
        return "exact and usable"
    if {step.detail for step in report.steps if step.status == "skipped"} == {QUICK_DETAIL}:
        return f"quick check passed (skipped: {skipped})"
    return f"passed, but NOT a full verification (skipped: {skipped})"
