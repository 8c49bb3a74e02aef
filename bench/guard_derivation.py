"""The guard derivation on every pipeline: how long the fast one takes, what it costs in memory,
and whether it finds exactly what the full two-oracle scan finds, with the real and a small
vocabulary.

Usage:
  python bench/guard_derivation.py fast [--families qwen3 llama3 ...]   # seconds each
  # and the full scans (minutes each)
  python bench/guard_derivation.py compare [--families ...] [--vocabularies real small]
  # under the serving bound: built-in models, verify's changes, ids-oracle pipelines
  python bench/guard_derivation.py bound
Prints a Markdown table for bench/RESULTS.md and writes bench/guard-derivation.json (fast, compare)
or bench/guard-derivation-bound.json (bound).
Each derivation runs in a process of its own (its RSS growth is its own).
"""

from __future__ import annotations

import argparse
import datetime
import gc
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

    from tokbackend._guard import guard_versions
    from tokbackend._guard.derive import derive_record
    from tokbackend._guard.records import record_key
    from tokbackend._guard.scan import from_ranges
    from tokbackend.backends import BackendUnavailableError, backend_class
    from tokbackend.equivalence.families import build_family

    tokenizer_json = build_family(family, vocabulary).backend_tokenizer.to_str()
    kind = backend_class(backend)
    try:
        kind(tokenizer_json, kind.options_for_scanning())
    except BackendUnavailableError as error:
        return {"unavailable": str(error)}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    record = derive_record(
        record_key(tokenizer_json, kind.guard_family),
        lambda text: kind(text, kind.options_for_scanning()),
        guard_versions(tuple(kind.versioned_libraries)),
        full=full,
    )
    return {
        "seconds": time.perf_counter() - started,
        "rss_growth_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024,
        "code_points": sorted(from_ranges(record["code_points"])),
        "scope": record["scope"],
        "pipeline": record["pipeline"],
    }


# `bound`: what the derivations accelerate() runs take against `tokbackend._guard.DERIVATION_BUDGET`:
# the built-in models, a pipeline no record covers, each change of `tokbackend verify` that makes
# a new pipeline (on Qwen3.6), and pipelines the ids oracle derives (the model's own vocabulary).
BOUND_CASES = (
    "qwen3.6",
    "qwen3",
    "own-pipeline",
    "qwen3.6, the normalizer removed",
    "qwen3.6, the normalizer replaced (NFKC)",
    "qwen3.6, the pre-tokenizer replaced (digits split first)",
    "qwen3.6, a pre-tokenizer setting changed in place",
    "family gemma3",
    "family llama2-legacy",
    "family mistral-metaspace",
    "qwen3.6's vocabulary, SentencePiece-style",  # an ids-oracle derivation with 248k pieces
)


def _bound_tokenizer_json(case: str) -> str:
    import tempfile

    import tokbackend
    from tokbackend.equivalence.changes import CHANGES
    from tokbackend.equivalence.families import build_family

    if case == "own-pipeline":
        from transformers import PreTrainedTokenizerFast

        from tokbackend.equivalence.server_models import own_pipeline_model

        path = own_pipeline_model(Path(tempfile.mkdtemp())) / "tokenizer.json"
        return PreTrainedTokenizerFast(tokenizer_file=str(path)).backend_tokenizer.to_str()
    if case == "qwen3.6's vocabulary, SentencePiece-style":
        spec = json.loads(tokbackend.load_hf("qwen3.6").backend_tokenizer.to_str())
        spec["normalizer"], spec["decoder"] = None, None
        spec["pre_tokenizer"] = {
            "type": "Metaspace",
            "replacement": "\u2581",
            "prepend_scheme": "first",
            "split": False,
        }
        vocabulary = spec["model"]["vocab"]
        vocabulary.update({f"<0x{byte:02X}>": len(vocabulary) + 1000 + byte for byte in range(256)})
        spec["model"]["byte_fallback"] = True
        return json.dumps(spec, ensure_ascii=False)
    if case.startswith("family "):
        return build_family(case.removeprefix("family "), "real").backend_tokenizer.to_str()
    model, _, change = case.partition(", ")
    tokenizer = tokbackend.load_hf(model)
    if change:
        next(known for known in CHANGES if known.name == change).apply(tokenizer)
    return tokenizer.backend_tokenizer.to_str()


def _bound_child(case: str, backend: str) -> dict:
    """Runs in a child process: one fast derivation under the serving bound; its wall-clock and
    CPU seconds, the bound's reading of them, its resident-set growth, and how it ended."""
    import time

    from tokbackend import _guard as guard
    from tokbackend._guard.derive import derive_record
    from tokbackend._guard.records import record_key
    from tokbackend._guard.scan import from_ranges, resident_bytes
    from tokbackend.backends import BackendUnavailableError, backend_class

    tokenizer_json = _bound_tokenizer_json(case)
    kind = backend_class(backend)
    try:
        kind(tokenizer_json, kind.options_for_scanning())
    except BackendUnavailableError as error:
        return {"unavailable": str(error)}
    gc.collect()  # what loading left behind is freed before, not during, the derivation
    _reset_peak_resident()
    resident, wall, cpu = resident_bytes(), time.perf_counter(), time.process_time()
    try:
        record = derive_record(
            record_key(tokenizer_json, kind.guard_family),
            lambda text: kind(text, kind.options_for_scanning()),
            guard.guard_versions(tuple(kind.versioned_libraries)),
            budget=guard.DERIVATION_BUDGET,
        )
        outcome = f"{record['scope']} record, {len(from_ranges(record['code_points']))} code points"
    except guard.GuardUnavailableError as error:
        outcome = f"{type(error).__name__}: {error}"
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "seconds": wall,
        "cpu_seconds": cpu,
        "bound_seconds": min(wall, cpu),
        "rss_growth_mib": (resident_bytes() - resident) / 2**20,
        "peak_rss_growth_mib": (_peak_resident() - resident) / 2**20,
        "outcome": outcome,
    }


def _reset_peak_resident() -> None:
    """Reset this process's peak resident set (Linux: VmHWM) to its resident set now."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def _peak_resident() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def run_bound() -> dict:
    """Every `BOUND_CASES` case with every backend, under the serving bound."""
    from tokbackend._guard import DERIVATION_BUDGET

    rows = []
    for case in BOUND_CASES:
        for backend in BACKENDS:
            completed = subprocess.run(
                [sys.executable, __file__, "bound-child", case, backend], capture_output=True, text=True
            )
            lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
            if completed.returncode != 0 or not lines:
                raise RuntimeError(f"{case} {backend}: {completed.stderr[-2000:]}")
            rows.append({"case": case, "backend": backend, **json.loads(lines[0].removeprefix("RESULT "))})
            print(json.dumps(rows[-1]), flush=True)
    lines = [
        f"| pipeline | backend | s | CPU s | bound's s (of {DERIVATION_BUDGET.seconds:g}) "
        f"| RSS growth MiB, at the end / at the peak (of {DERIVATION_BUDGET.megabytes:g}) | outcome |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        if "unavailable" in row:
            lines.append(f"| {row['case']} | {row['backend']} | | | | | cannot load |")
            continue
        lines.append(
            f"| {row['case']} | {row['backend']} | {row['seconds']:.2f} | {row['cpu_seconds']:.2f} | "
            f"{row['bound_seconds']:.2f} | {row['rss_growth_mib']:.0f} / {row['peak_rss_growth_mib']:.0f} | "
            f"{row['outcome'][:90]} |"
        )
    return {"rows": rows, "markdown": "\n".join(lines)}


def _full_scans(family: str, vocabulary: str) -> dict:
    """Runs in a child process: the full two-oracle scan against every backend that loads the
    family, HuggingFace's side of each oracle run once for all of them (as `derive_record` would
    find for each, in a quarter of the time of one derivation per backend)."""
    import time

    from tokbackend._guard.contexts import derive_contexts
    from tokbackend._guard.derive import _hf_encoder, boundary_tokenizer_json, code_points_to_scan, core_contexts
    from tokbackend._guard.scan import scan
    from tokbackend.backends import BackendUnavailableError, backend_class
    from tokbackend.equivalence.families import build_family

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
    parser.add_argument("mode", choices=["fast", "compare", "bound", "child", "bound-child"])
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--families", nargs="+")
    parser.add_argument("--vocabularies", nargs="+", default=["real", "small"], help="compare: the full scans to run")
    arguments = parser.parse_args()
    if arguments.mode == "child":
        family, vocabulary, backend, derivation = arguments.rest
        result = (
            _full_scans(family, vocabulary)
            if backend == "all"
            else _child(family, vocabulary, backend, derivation == "full")
        )
        print("RESULT " + json.dumps(result))
        return
    if arguments.mode == "bound-child":
        print("RESULT " + json.dumps(_bound_child(*arguments.rest)))
        return
    from tokbackend.equivalence.families import FAMILY_NAMES

    if arguments.mode == "bound":
        result = run_bound()
    else:
        result = run(
            arguments.families or list(FAMILY_NAMES), arguments.vocabularies if arguments.mode == "compare" else []
        )
    header = f"{datetime.date.today()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}"
    print(header)
    print(result["markdown"])
    name = "guard-derivation-bound" if arguments.mode == "bound" else "guard-derivation"
    output = Path(os.environ.get("OUT", ROOT / "bench")) / f"{name}.json"
    output.write_text(json.dumps({"host": header, **result}, indent=1))


if __name__ == "__main__":
    main()
