"""The `tokbackend` command line: `verify` (the pre-deploy gate), `guard` (a model's guard records,
derived ahead of time) and `sglang-gate` (a live SGLang server with the flag against one without)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
from pathlib import Path
from types import MappingProxyType

from tokbackend import __version__
from tokbackend._guard.records import BAKED_RECORDS_ENV
from tokbackend._options import DEFAULT_BACKEND
from tokbackend._routing.names import DEFAULT_FLAG_VALUE, flag_values
from tokbackend._verify import (
    EXIT_CODES,
    EXIT_GRAMMAR,
    EXIT_MISMATCH,
    EXIT_MISSING_TOOLS,
    EXIT_OK,
    EXIT_PRECEDENCE,
    EXIT_UNAVAILABLE,
    STEPS,
    summary_table,
    verify_model,
)
from tokbackend._wording import counted

# What each command cannot run without, all in the [verify] extra (xgrammar is checked in its step).
NEEDED_MODULES = MappingProxyType(
    {"verify": ("hypothesis", "faker", "regex", "tqdm"), "sglang-gate": ("jsonschema", "faker", "hypothesis")}
)


def build_parser() -> argparse.ArgumentParser:
    """The `tokbackend` parser: `verify`, `guard` and `sglang-gate`."""
    import textwrap

    from tokbackend._routing import backend_choices

    rows = [
        textwrap.fill(text.replace("`", ""), 96, initial_indent=f"  {code}  ", subsequent_indent="     ")
        for code, text in EXIT_CODES.items()
    ]
    order = ", ".join(str(code) for code in EXIT_PRECEDENCE)
    parser = argparse.ArgumentParser(
        prog="tokbackend", description="Fast, exact tokenizer backends for serving stacks."
    )
    parser.add_argument("--version", action="version", version=f"tokbackend {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser(
        "verify",
        help="prove a backend gives HuggingFace's ids for a model",
        description="Check that BACKEND encodes exactly like HuggingFace for MODEL, before deploying it.",
        epilog="exit codes:\n"
        + "\n".join(rows)
        + f"\nwhere a run has several outcomes, the first of {order} that applies\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument(
        "model",
        metavar="MODEL",
        help='built-in name ("qwen3.6", "qwen3"), a local directory (or its tokenizer.json), or a hub id in the '
        "local HF cache",
    )
    verify.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        choices=list(dict.fromkeys([*backend_choices(), *flag_values()])),
        metavar="BACKEND",
        help=f"a backend ({', '.join(backend_choices())}), or a server flag's value as you pass it "
        f"({', '.join(value for value in flag_values() if value not in backend_choices())}): "
        f"verifies the lane that flag serves (default: {DEFAULT_BACKEND})",
    )
    verify.add_argument(
        "--profile",
        default="ci",
        choices=["dev", "ci", "thorough"],
        help="how many Hypothesis examples per input class",
    )
    verify.add_argument("--examples", type=int, metavar="N", help="examples per input class (overrides --profile)")
    verify.add_argument(
        "--seed", type=int, default=0, metavar="N", help="Hypothesis seed (0: the profile's fixed derandomized run)"
    )
    verify.add_argument("--json", metavar="PATH", help="also write a machine-readable report to PATH")
    verify.add_argument(
        "--quick",
        action="store_true",
        help="about a minute, for boot-time use: leaves out the code-point scan, the changes after acceleration and "
        "the grammar gate, and runs fewer examples; exits 0 when the rest passes (not a full verification)",
    )
    verify.add_argument("--no-progress", action="store_true", help="no progress bars")
    verify.add_argument(
        "--only",
        metavar="STEPS",
        type=parse_steps,
        help=f"run only these steps after load and boot probe, comma-separated ({','.join(STEPS)}); the rest "
        f"show as skipped",
    )
    verify.add_argument(
        "--code-points",
        metavar="RANGES",
        type=parse_code_points,
        help="scan only these code points, e.g. U+0900..U+097F,U+323B0 (default: every code point)",
    )
    guard = commands.add_parser(
        "guard",
        help="derive the Unicode divergence guard for a model's pipeline and record it (bake it into an image)",
        description="Find the code points on which BACKEND and HuggingFace diverge for MODEL's pipeline; record them.",
    )
    guard.add_argument("model", help="built-in name, local directory, or hub id in the local HF cache")
    guard.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        choices=backend_choices(),
        help=f"the backend to derive for (default: {DEFAULT_BACKEND}, every backend auto may choose)",
    )
    guard.add_argument(
        "--output",
        "--output-dir",
        metavar="DIR",
        help=f"where to write the record (default: the tokbackend cache); bake DIR into an image and set "
        f"{BAKED_RECORDS_ENV}=DIR",
    )
    guard.add_argument(
        "--full",
        action="store_true",
        help="scan every code point with both oracles (minutes) instead of where engines can differ (seconds)",
    )
    gate = commands.add_parser(
        "sglang-gate",
        help="boot SGLang with and without --tokenizer-backend and compare their answers (run on a GPU host)",
        description=(
            "Start `python -m sglang.launch_server --model-path MODEL SERVER_ARGS` twice, without and with "
            "--tokenizer-backend FLAG (or use --reference-url/--candidate-url), send both the same greedy and "
            "streamed requests, chats and a JSON-schema completion, and compare."
        ),
        epilog="exit codes: 0 identical, 1 a difference, 2 usage error, 3 a JSON-schema answer that does not conform, "
        "5 missing tools (the [verify] extra), 6 a server that cannot serve, 130 or 143 stopped by SIGINT "
        "(Ctrl-C) or SIGTERM "
        "(the servers it started are stopped)",
    )
    gate.add_argument("--model-path", required=True, help="the model directory (its tokenizer builds the prompts)")
    gate.add_argument(
        "--flag",
        default=DEFAULT_FLAG_VALUE,
        help=f"the --tokenizer-backend value to check (default {DEFAULT_FLAG_VALUE})",
    )
    gate.add_argument("--port", type=int, default=30000)
    gate.add_argument(
        "--long", type=int, nargs="*", default=[8000, 16000, 32000], help="token counts of the long prompts"
    )
    gate.add_argument(
        "--timed",
        type=int,
        default=5,
        help="distinct prompts of the longest --long size timed to their first token on each",
    )
    gate.add_argument("--reference-url", help="a running server without the flag (instead of starting one)")
    gate.add_argument("--candidate-url", help="a running server with the flag (instead of starting one)")
    gate.add_argument("--log-dir", default=".", help="where the servers' logs go")
    gate.add_argument("--timeout", type=float, default=900, help="seconds each server may take to start")
    gate.add_argument("--json", metavar="PATH", help="also write the report to PATH")
    gate.add_argument("server_args", nargs=argparse.REMAINDER, help="after --: arguments for both servers")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tokbackend` console script; an unknown option is its command's usage error."""
    parser = build_parser()
    arguments, unknown = parser.parse_known_args(argv)
    if unknown:
        subcommand_parser(parser, arguments.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if arguments.command == "guard":
        return derive_guard(arguments.model, arguments.backend, arguments.output, arguments.full)
    missing = [module for module in NEEDED_MODULES[arguments.command] if importlib.util.find_spec(module) is None]
    if missing:
        extra = f"needs the [verify] extra (missing: {', '.join(missing)}): pip install 'tokbackend[verify]'"
        print(f"tokbackend {arguments.command} {extra}", file=sys.stderr)
        return EXIT_MISSING_TOOLS
    return verify(arguments) if arguments.command == "verify" else sglang_gate(arguments)


def verify(arguments: argparse.Namespace) -> int:
    """`tokbackend verify`: the report as a table (and as JSON where asked for), and its exit code."""
    import os

    from hypothesis.configuration import set_hypothesis_home_dir
    from tqdm.contrib.logging import logging_redirect_tqdm

    from tokbackend._cache_dir import cache_dir

    # Hypothesis's storage would otherwise go under the user's working directory.
    if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        set_hypothesis_home_dir(cache_dir() / "hypothesis")
    try:
        with logging_redirect_tqdm():  # log lines above the progress bars, not through them
            report = verify_model(
                arguments.model,
                backend=arguments.backend,
                profile=arguments.profile,
                examples=arguments.examples,
                seed=arguments.seed,
                quick=arguments.quick,
                progress=not arguments.no_progress and sys.stderr.isatty(),
                code_points=arguments.code_points,
                only=arguments.only,
            )
    except KeyboardInterrupt:
        return 130
    print(f"\n{summary_table(report)}")
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(report.as_json(), indent=2, ensure_ascii=False), encoding="utf-8")
    return report.exit_code


def subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of `tokbackend COMMAND`."""
    commands: argparse._SubParsersAction[argparse.ArgumentParser]
    [commands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return commands.choices[command]


def parse_steps(text: str) -> set[str]:
    """'scan,grammar' -> {"scan", "grammar"}; an unknown name is a usage error naming the known ones."""
    steps = {step.strip() for step in text.split(",") if step.strip()}
    unknown = sorted(steps - set(STEPS))
    if unknown or not steps:
        raise argparse.ArgumentTypeError(
            f"unknown step(s) {', '.join(unknown) or repr(text)}; known: {', '.join(STEPS)}"
        )
    return steps


def parse_code_points(text: str) -> list[int]:
    """'U+0900..U+097F,U+323B0' -> the code points (no surrogates); anything else is a usage error."""
    code_points: set[int] = set()
    try:
        for part in filter(None, (piece.strip() for piece in text.split(","))):
            first, _, last = part.partition("..")
            start = int(first.upper().removeprefix("U+"), 16)
            end = int(last.upper().removeprefix("U+"), 16) if last else start
            if not 0 <= start <= end <= 0x10FFFF:
                raise ValueError(part)
            code_points.update(code_point for code_point in range(start, end + 1) if not 0xD800 <= code_point <= 0xDFFF)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not code point ranges: {text!r} (e.g. U+0900..U+097F,U+323B0)") from None
    if not code_points:
        raise argparse.ArgumentTypeError(f"no code point to scan in {text!r} (e.g. U+0900..U+097F,U+323B0)")
    return sorted(code_points)


def _progress_line(text: str) -> None:
    """One line of progress on stderr, rewritten in place on a terminal ("" clears it)."""
    if sys.stderr.isatty():
        print(f"\r{text[:100].ljust(100)}\r", end="", file=sys.stderr, flush=True)
    elif text:
        print(text, file=sys.stderr, flush=True)


def derive_guard(model: str, backend_name: str, output: str | None, full: bool = False) -> int:
    """`tokbackend guard`: derive and write a guard record per backend (`tokbackend._guard.offline`)."""
    import tokbackend
    from tokbackend._cache_dir import cache_dir
    from tokbackend._guard.offline import derive_records
    from tokbackend._guard.scan import format_ranges
    from tokbackend._routing import AUTO
    from tokbackend._routing.auto import candidates
    from tokbackend._verify import EXIT_NOT_FOUND

    try:
        tokenizer_json = tokbackend.load_hf(model).backend_tokenizer.to_str()
    except tokbackend.ModelNotFoundError as error:
        print(error.cli_message, file=sys.stderr)
        return EXIT_NOT_FOUND
    backends = candidates() if backend_name == AUTO else [backend_name]
    directory = Path(output) if output else cache_dir() / "guards"
    for derived in derive_records(
        tokenizer_json, backends, directory, full, lambda name, step: _progress_line(f"  {name}: {step}")
    ):
        _progress_line("")
        name, guard = derived.backend, derived.guard
        if derived.problem is not None:
            print(f"{model}, {name}: {derived.problem}", file=sys.stderr)
        elif guard is None:
            print(f"{model}, {name}: needs no guard")
        else:
            record = guard.record
            derived_in = f"{record['derivation']} derivation in {record['scan_seconds']} s: {guard.describe()}"
            scope = f"{record['scope']} record for {record['pipeline_description']}; versions {record['applies_to'][0]}"
            print(f"{model}, {name}: {derived_in}\n  {format_ranges(guard.code_points)}\n  {scope}; {record['path']}")
    if output:
        print(f"serve with {BAKED_RECORDS_ENV}={Path(output).resolve()} so accelerate() finds it without a scan")
    return 0


def sglang_gate(arguments: argparse.Namespace) -> int:
    """`tokbackend sglang-gate`: the serving gate (`tokbackend.integrations._sglang_gate`)."""
    import tokbackend
    from tokbackend.equivalence.corpus import prompt_of_tokens
    from tokbackend.integrations import _sglang_gate as gate

    hf = tokbackend.load_hf(arguments.model_path)
    added = [str(token) for token in hf.added_tokens_decoder.values()]

    def count(text: str) -> int:
        return len(hf.backend_tokenizer.encode(text).ids)

    prompts = gate.probes(count, added, tuple(arguments.long))
    timed = [
        prompt_of_tokens(count, 9_000 + index, max(arguments.long, default=32000)) for index in range(arguments.timed)
    ]
    server_args = [argument for argument in arguments.server_args if argument != "--"]
    common = ["--model-path", arguments.model_path, "--port", str(arguments.port), *server_args]
    flag = ["--tokenizer-backend", arguments.flag]
    url = f"http://127.0.0.1:{arguments.port}"
    reference, candidate = (
        gate.Server(name, given or url, None if given else command, Path(arguments.log_dir) / f"server-{role}.log")
        for name, role, given, command in (
            ("without the flag", "reference", arguments.reference_url, common),
            (" ".join(flag), "candidate", arguments.candidate_url, [*common, *flag]),
        )
    )
    try:
        with gate.interruptible():
            exit_code, report = gate.run_gate(
                reference, candidate, prompts, gate.chats(added), timeout=arguments.timeout, timed_prompts=timed
            )
    except gate.GateInterrupted as interruption:
        code = 128 + interruption.signal  # as a shell reports a command a signal ended
        message = f"{interruption.signal.name}: stopped the servers it started; no verdict (exit {code})"
        print(f"tokbackend sglang-gate: {message}", file=sys.stderr)
        return code
    for server, lines in report.get("startup_lines", {}).items():
        processes = ", ".join(process for process, _, _ in lines)
        print(f"{server}: tokbackend start-up lines in {len(lines)} processes: {processes}")
    for server, seconds in report.get("first_token_seconds", {}).items():
        if seconds:
            median_ms = sorted(seconds)[len(seconds) // 2] * 1e3
            print(f"{server}: time to first token of {len(seconds)} distinct long prompts: median {median_ms:.1f} ms")
    verdict = {
        EXIT_OK: "identical: the flag changes no answer",
        EXIT_MISMATCH: "DIFFERENT: do not deploy",
        EXIT_GRAMMAR: "a JSON-schema answer does not conform",
        EXIT_UNAVAILABLE: "a server cannot serve",
    }
    answered = "; ".join(
        f"{server}: {counted(count, 'prompt')}" for server, count in report["prompts_answered"].items()
    )
    print(f"result: {verdict[exit_code]} (prompts answered, {answered}; exit {exit_code})")
    if arguments.json:
        Path(arguments.json).write_text(
            json.dumps({"exit_code": exit_code, **report}, indent=1, ensure_ascii=False), encoding="utf-8"
        )
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
