"""The guard derivation on every pipeline: how long the fast one takes, what it costs in memory,
and whether it finds exactly what the full two-oracle scan finds, with the real and a small
vocabulary.

Usage:
  python bench/guard_derivation.py fast [--families qwen3 llama3 ...]   # seconds each
  python bench/guard_derivation.py compare [--families ...] [--vocabularies real small]  # and the full scans (minutes each)
Prints a Markdown table for bench/RESULTS.md and writes bench/guard-derivation-<mode>.json.
Each derivation runs in a process of its own (its RSS growth is its own).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BACKENDS = ("gigatoken", "fastokens")


def _child(family: str, vocabulary: str, backend: str, full: bool) -> dict:
    """Runs in a child process: one derivation, timed; its code points and RSS growth."""
    import resource
    import time

    from equivalence.families import build_family
    from tokbackend.backends import BackendUnavailableError, backend_class
    from tokbackend.guard import guard_versions
    from tokbackend.guard.derive import derive_fast, derive_record
    from tokbackend.guard.records import record_key
    from tokbackend.guard.scan import from_ranges

    tokenizer_json = build_family(family, vocabulary).backend_tokenizer.to_str()
    kind = backend_class(backend)
    try:
        kind(tokenizer_json, kind.options_for_scanning())
    except BackendUnavailableError as error:
        return {"unavailable": str(error)}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    derive = derive_record if full else derive_fast
    record = derive(
        tokenizer_json,
        kind.guard_family,
        lambda text: kind(text, kind.options_for_scanning()),
        record_key(tokenizer_json, kind.guard_family),
        guard_versions(tuple(kind.versioned_libraries)),
    )
    return {
        "seconds": time.perf_counter() - started,
        "rss_growth_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024,
        "code_points": sorted(from_ranges(record["code_points"])),
        "scope": record["scope"],
        "pipeline": record["pipeline"],
    }


def _full_scans(family: str, vocabulary: str) -> dict:
    """Runs in a child process: the full two-oracle scan against every backend that loads the
    family, HuggingFace's side of each oracle run once for all of them (as `derive_record` would
    find for each, in a quarter of the time of one derivation per backend)."""
    import time

    from equivalence.families import build_family
    from tokbackend.backends import BackendUnavailableError, backend_class
    from tokbackend.guard.boundaries import boundary_tokenizer_json
    from tokbackend.guard.contexts import derive_contexts
    from tokbackend.guard.derive import _hf_encoder, code_points_to_scan, core_contexts
    from tokbackend.guard.scan import scan

    tokenizer_json = build_family(family, vocabulary).backend_tokenizer.to_str()
    contexts = derive_contexts(tokenizer_json)
    oracles = {"ids": (tokenizer_json, core_contexts(contexts))}
    boundary_json = boundary_tokenizer_json(tokenizer_json)
    if boundary_json is not None:
        oracles["boundaries"] = (boundary_json, contexts)
    found: dict[str, set[int]] = {}
    started = time.perf_counter()
    for oracle_json, oracle_contexts in oracles.values():
        candidates = {}
        for name in BACKENDS:
            kind = backend_class(name)
            try:
                candidates[name] = kind(oracle_json, kind.options_for_scanning()).encode_batch
            except BackendUnavailableError:
                continue
        reference = _hf_encoder(oracle_json)
        reports = scan(reference, candidates, oracle_contexts, code_points_to_scan(reference, candidates))
        for name, report in reports.items():
            found.setdefault(name, set()).update(report.all_divergent)
    return {name: sorted(points) for name, points in found.items()} | {"seconds": time.perf_counter() - started}


def _in_child(family: str, vocabulary: str, backend: str, full: bool) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "child", family, vocabulary, backend, "full" if full else "fast"],
        capture_output=True,
        text=True,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"{family} {vocabulary} {backend}: {completed.stderr[-2000:]}")
    return json.loads(lines[0].removeprefix("RESULT "))


def run(families: list[str], compare: list[str]) -> dict:
    """Fast derivations of every family with both vocabularies; with `compare` (vocabularies),
    the full scans of those too."""
    rows = []
    for family in families:
        full = {vocabulary: _in_child(family, vocabulary, "all", full=True) for vocabulary in compare}
        for backend in BACKENDS:
            row = {"family": family, "backend": backend}
            for vocabulary in ("real", "small"):
                row[vocabulary] = _in_child(family, vocabulary, backend, full=False)
                if vocabulary in full and backend in full[vocabulary]:
                    row[f"{vocabulary}, full scan"] = {
                        "code_points": full[vocabulary][backend],
                        "seconds": full[vocabulary]["seconds"],
                    }
            rows.append(row)
            print(json.dumps({key: _summary(value) for key, value in row.items()}), flush=True)
    lines = [
        "| pipeline | backend | fast s (real) | RSS MiB | code points (real) | small vocabulary "
        "| full scan (real) | full scan (small) |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for row in rows:
        real = row["real"]
        if "unavailable" in real:
            lines.append(f"| {row['family']} | {row['backend']} | cannot load | | | | | |")
            continue
        same = "same set" if real["code_points"] == row["small"].get("code_points") else "DIFFERS"
        cells = [
            row["family"],
            row["backend"],
            f"{real['seconds']:.1f}",
            f"{real['rss_growth_mib']:.0f}",
            str(len(real["code_points"])),
            same,
        ]
        for vocabulary in ("real", "small"):
            full = row.get(f"{vocabulary}, full scan")
            if full is None:
                cells.append("not run")
            else:
                verdict = "same set" if full["code_points"] == row[vocabulary]["code_points"] else "DIFFERS"
                cells.append(f"{verdict} ({full['seconds']:.0f} s)")
        lines.append("| " + " | ".join(cells) + " |")
    return {"rows": rows, "markdown": "\n".join(lines)}


def _summary(value):
    if isinstance(value, dict) and "code_points" in value:
        return {**value, "code_points": len(value["code_points"])}
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["fast", "compare", "child"])
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--families", nargs="+")
    parser.add_argument("--vocabularies", nargs="+", default=["real", "small"], help="compare: the full scans to run")
    arguments = parser.parse_args()
    if arguments.mode == "child":
        family, vocabulary, backend, derivation = arguments.rest
        result = (
            _full_scans(family, vocabulary) if backend == "all" else _child(family, vocabulary, backend, derivation == "full")
        )
        print("RESULT " + json.dumps(result))
        return
    from equivalence.families import FAMILY_NAMES

    result = run(arguments.families or list(FAMILY_NAMES), arguments.vocabularies if arguments.mode == "compare" else [])
    header = f"{datetime.date.today()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}"
    print(header)
    print(result["markdown"])
    output = Path(os.environ.get("OUT", ROOT / "bench")) / f"guard-derivation-{arguments.mode}.json"
    output.write_text(json.dumps({"host": header, **result}, indent=1))


if __name__ == "__main__":
    main()
