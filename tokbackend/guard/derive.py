"""Deriving a guard record: both oracles, every scan context, every code point.

- Oracle "ids": the model's own vocabulary, backend against HuggingFace, in the first two
  contexts of each family (it also catches byte-level differences the second cannot see).
- Oracle "boundaries": the boundary-revealing vocabulary (`tokbackend.guard.boundaries`) over
  the model's normalizer and pre-tokenizer, backend against HuggingFace, in every context:
  it sees every boundary and normalization difference, whatever the model's merges are.

The guard is the union. Planes 0-3 and 14 (every plane that holds assigned characters in any
Unicode version to date) are scanned in every context. Planes 4-13 hold no assigned character
and planes 15-16 only private-use ones, whose properties the Unicode stability policy fixes;
they are screened in two composite contexts that expose letter, mark, digit, space and
combining-class differences, and a plane the screen finds anything in is scanned in full too.

Derivation uses its own backend instances without a cache budget, so its encodes never count
toward (or trigger) the serving backend's cache renewals; they are freed when it returns.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

from tokbackend.guard.boundaries import boundary_tokenizer_json
from tokbackend.guard.contexts import ScanContext, derive_contexts
from tokbackend.guard.records import RECORD_FORMAT
from tokbackend.guard.scan import ScanReport, plane_code_points, ranges, scan

FULL_PLANES = (0, 1, 2, 3, 14)
SCREENED_PLANES = (4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16)
SCREEN_CONTEXTS = (ScanContext("a{0}'s {0}1", "screen"), ScanContext(" {0}{0}\u0301 \u0345{0}\u0334", "screen"))

BackendBuilder = Callable[[str], object]  # tokenizer.json -> an object with encode_batch


def _hf_encoder(tokenizer_json: str):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]

    return encode_batch


def core_contexts(contexts: list[ScanContext], per_family: int = 2) -> list[ScanContext]:
    """The first `per_family` contexts of each family."""
    taken: dict[str, int] = {}
    core = []
    for context in contexts:
        if taken.get(context.family, 0) < per_family:
            taken[context.family] = taken.get(context.family, 0) + 1
            core.append(context)
    return core


def code_points_to_scan(reference: Callable, candidates: dict[str, Callable]) -> list[int]:
    """The planes every scan covers: the full planes, plus any screened plane in which the
    screen contexts show a difference between `reference` and any of `candidates`."""
    screened = scan(reference, candidates, SCREEN_CONTEXTS, plane_code_points(SCREENED_PLANES))
    flagged = {code_point >> 16 for report in screened.values() for code_point in report.all_divergent}
    return plane_code_points(set(FULL_PLANES) | flagged)


def run_oracles(
    tokenizer_json: str,
    build_backend: BackendBuilder,
    contexts: list[ScanContext] | None = None,
    code_points: list[int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, ScanReport]:
    """{"ids": report, "boundaries": report (absent when that oracle does not apply)}.

    code_points: scan exactly these in every context, no screen (default: the plan above).
    """
    contexts = derive_contexts(tokenizer_json) if contexts is None else contexts
    encoders = {"ids": (_hf_encoder(tokenizer_json), build_backend(tokenizer_json).encode_batch)}
    boundary_json = boundary_tokenizer_json(tokenizer_json)
    if boundary_json is not None:
        encoders["boundaries"] = (_hf_encoder(boundary_json), build_backend(boundary_json).encode_batch)
    contexts_of = {"ids": core_contexts(contexts), "boundaries": contexts}
    reports: dict[str, ScanReport] = {}
    for oracle, (reference, candidate) in encoders.items():
        scanned = code_points if code_points is not None else code_points_to_scan(reference, {oracle: candidate})
        reports[oracle] = scan(
            reference,
            {oracle: candidate},
            contexts_of[oracle],
            scanned,
            progress=None if progress is None else lambda context, oracle=oracle: progress(f"{oracle}: {context.template!r}"),
        )[oracle]
    return reports


def derive_record(
    tokenizer_json: str,
    backend_name: str,
    build_backend: BackendBuilder,
    fingerprint: str,
    versions: dict[str, str],
    contexts: list[ScanContext] | None = None,
    code_points: list[int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Run both oracles and return a guard record (see `tokbackend.guard.records`)."""
    contexts = contexts or derive_contexts(tokenizer_json)
    reports = run_oracles(tokenizer_json, build_backend, contexts, code_points, progress)
    union = sorted({code_point for report in reports.values() for code_point in report.all_divergent})
    return {
        "format": RECORD_FORMAT,
        "backend": backend_name,
        "model_fingerprint": fingerprint,
        "applies_to": [versions],
        "derived_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "scan_seconds": round(sum(report.seconds for report in reports.values()), 1),
        "contexts": [[context.template, context.family] for context in contexts],
        "code_points": [list(pair) for pair in ranges(union)],
        "found_by": {
            oracle: {family: [list(pair) for pair in ranges(found)] for family, found in report.by_family().items()}
            for oracle, report in reports.items()
        },
    }
