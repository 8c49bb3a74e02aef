"""The `tokbackend` command line: `tokbackend verify <model>` (the pre-deploy gate)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from tokbackend.verify import EXIT_UNAVAILABLE, summary_table, verify_model

VERIFY_EPILOG = """exit codes:
  0  the backend is exact and usable for this model
  1  a mismatch was found (minimal counterexamples are printed)
  2  the backend cannot serve this model (the reason is printed)
  3  the grammar gate failed
"""


def build_parser() -> argparse.ArgumentParser:
    from tokbackend.backends import available_backends

    parser = argparse.ArgumentParser(prog="tokbackend", description="Fast, exact tokenizer backends for serving stacks.")
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser(
        "verify",
        help="prove a backend gives HuggingFace's ids for a model",
        description="Check that BACKEND encodes exactly like HuggingFace for MODEL, before deploying it.",
        epilog=VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("model", help='built-in name ("qwen3.6", "qwen3"), a local directory, or a hub id in the local HF cache')
    verify.add_argument("--backend", default="gigatoken", choices=available_backends())
    verify.add_argument(
        "--profile", default="ci", choices=["dev", "ci", "thorough"], help="how many Hypothesis examples per input class"
    )
    verify.add_argument("--examples", type=int, help="examples per input class (overrides --profile)")
    verify.add_argument("--seed", type=int, default=0, help="Hypothesis seed (0: the profile's fixed derandomized run)")
    verify.add_argument("--json", metavar="PATH", help="also write a machine-readable report to PATH")
    verify.add_argument("--quick", action="store_true", help="seconds, for boot-time use: no code-point scan, no grammar gate")
    verify.add_argument("--no-progress", action="store_true", help="no progress bars")
    guard = commands.add_parser(
        "guard",
        help="derive the Unicode divergence guard for a model (scan every code point) and record it",
        description="Scan every code point through BACKEND and HuggingFace; record the divergent ones for MODEL.",
    )
    guard.add_argument("model", help="built-in name, local directory, or hub id in the local HF cache")
    guard.add_argument("--backend", default="gigatoken", choices=available_backends())
    guard.add_argument("--output-dir", help="where to write the record (default: the tokbackend cache)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tokbackend` console script."""
    arguments = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if arguments.command == "guard":
        return derive_guard(arguments.model, arguments.backend, arguments.output_dir)
    try:
        report = verify_model(
            arguments.model,
            backend=arguments.backend,
            profile=arguments.profile,
            examples=arguments.examples,
            seed=arguments.seed,
            quick=arguments.quick,
            progress=not arguments.no_progress and sys.stderr.isatty(),
        )
    except KeyboardInterrupt:
        return 130
    print()
    print(summary_table(report))
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as handle:
            json.dump(report.as_json(), handle, indent=2, ensure_ascii=False)
    return report.exit_code if report.steps else EXIT_UNAVAILABLE


def derive_guard(model: str, backend_name: str, output_dir: str | None) -> int:
    """`tokbackend guard`: derive and write a guard record; print what it holds."""
    from pathlib import Path

    import tokbackend
    from equivalence.codepoints import format_ranges
    from tokbackend.backends import backend_factory
    from tokbackend.cache import cache_dir
    from tokbackend.guard import _code_points_from_ranges, derive_record, model_fingerprint, write_record

    hf = tokbackend.load_hf(model)
    record = derive_record(hf, backend_factory(backend_name)(hf), backend_name, model_fingerprint(hf))
    path = write_record(record, Path(output_dir) if output_dir else cache_dir() / "guards")
    code_points = _code_points_from_ranges(record["code_points"])
    print(f"{model}: {len(code_points)} divergent code points in {record['scan_seconds']} s: {format_ranges(code_points)}")
    print(f"versions {record['versions']}; written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
