"""Deriving a guard record (`derive_record`): the fast derivation a fresh replica runs, and the full scan.

Two oracles compare a backend with HuggingFace: "boundaries" (byte-level BPE only: a pipeline
record) and "ids", the model's own vocabulary (a model record). The fast derivation scans where
engines can differ (`candidate_runs`) and screens a sample of the rest; the full one, offline, scans
the planes with assigned characters and screens the others. Both first refuse a backend wrong on ASCII.
"""

from __future__ import annotations

import datetime
import functools
import json
import time
from collections.abc import Callable, Sequence

from tokbackend._guard.contexts import (
    FIXED_PLANES_STRIDE,
    candidate_runs,
    derive_contexts,
    pipeline_steps,
    representatives,
    run_around,
    sample,
)
from tokbackend._guard.records import RECORD_FORMAT, GuardRecord, RecordKey, describe_pipeline
from tokbackend._guard.scan import (
    UNBOUNDED,
    DerivationBudget,
    DerivationMeter,
    GuardUnavailableError,
    ScanContext,
    ScanReport,
    from_ranges,
    plane_code_points,
    ranges,
    scan,
)
from tokbackend._tokenizer_json import model_settings, top_level_sections
from tokbackend.backends._arrays import in_call_forms
from tokbackend.backends._base import BackendClass, BatchEncoder, EncodeBackend

FULL_PLANES = (0, 1, 2, 3, 14)
SCREENED_PLANES = (4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16)
SCREEN_CONTEXTS = (ScanContext("a{0}'s {0}1", "screen"), ScanContext(" {0}{0}\u0301 \u0345{0}\u0334", "screen"))
# the UTF-8 bytes the boundaries oracle's merges join
_LEAD_BYTES = range(0xC2, 0xF5)
_CONTINUATION_BYTES = range(0x80, 0xC0)
_ASCII_BYTES = range(0x80)

BackendBuilder = Callable[[str], EncodeBackend]  # tokenizer.json -> a backend (its encode_batch is used)
Encoders = tuple[BatchEncoder, BatchEncoder]  # (HuggingFace's, a backend's)


def scanning_instances(kind: BackendClass) -> BackendBuilder:
    """Builds a derivation's throw-away instances of `kind` (its options for scanning)."""
    return lambda text: kind(text, kind.options_for_scanning())


def boundary_tokenizer_json(tokenizer_json: str) -> str | None:
    """The "boundaries" oracle's tokenizer.json, or None where the model is not byte-level BPE: the
    model's normalizer and pre-tokenizer with a BPE vocabulary whose only merges join a non-ASCII
    character's edge bytes to its neighbours' within one pre-token, so that every pre-token
    boundary next to one shows in the ids."""
    sections = top_level_sections(tokenizer_json)
    spec = {**sections, "model": model_settings(sections)}
    steps = pipeline_steps(spec, "pre_tokenizer")
    if (spec.get("model") or {}).get("type") != "BPE" or not any(step.get("type") == "ByteLevel" for step in steps):
        return None
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    mapping: dict[int, str] = bytes_to_unicode()  # type: ignore[no-untyped-call]  # untyped; GPT-2's byte map, as ByteLevel uses
    vocab = {mapping[byte]: byte for byte in range(256)}
    # an ASCII byte then a lead byte; a continuation byte then an ASCII or a lead byte (in this
    # order: their ranks)
    pairs = [(ascii_byte, lead) for ascii_byte in _ASCII_BYTES for lead in _LEAD_BYTES]
    pairs += [(continuation, byte) for continuation in _CONTINUATION_BYTES for byte in (*_ASCII_BYTES, *_LEAD_BYTES)]
    merges = [[mapping[first], mapping[second]] for first, second in pairs]
    vocab.update({first + second: 256 + rank for rank, (first, second) in enumerate(merges)})
    spec["model"] = {**spec["model"], "vocab": vocab, "merges": merges, "ignore_merges": False, "byte_fallback": False}
    spec["added_tokens"] = []
    spec["post_processor"] = None
    return json.dumps(spec, ensure_ascii=False)


def _hf_encoder(tokenizer_json: str) -> BatchEncoder:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def encode_batch(texts: list[str]) -> list[list[int]]:
        return [encoding.ids for encoding in tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

    return encode_batch


def _encoder_pair(tokenizer_json: str, build_backend: BackendBuilder) -> Encoders:
    """(HuggingFace's, a new backend instance's) encode of `tokenizer_json`."""
    return _hf_encoder(tokenizer_json), in_every_call_form(build_backend(tokenizer_json))


# Ids no tokenizer gives: a text whose call forms disagree is divergent, whatever HF's ids are.
_FORMS_DISAGREE = [-1]


def in_every_call_form(backend: EncodeBackend) -> BatchEncoder:
    """`backend`'s batch encode, answering a text's ids only where every call form (batch or one,
    lists or arrays) agrees on them; elsewhere ids that differ from HF's, so the text is guarded."""

    def encode_batch(texts: list[str]) -> list[list[int]]:
        forms = in_call_forms(backend, texts)
        return [
            list(ids) if all(list(other) == ids for other in others) else _FORMS_DISAGREE
            for ids, *others in zip(*forms)
        ]

    return encode_batch


def core_contexts(contexts: list[ScanContext], per_family: int = 2) -> list[ScanContext]:
    """The first `per_family` contexts of each family."""
    core: list[ScanContext] = []
    for context in contexts:
        if sum(other.family == context.family for other in core) < per_family:
            core.append(context)
    return core


def refuse_inexact_on_ascii(
    encoders: Encoders, contexts: list[ScanContext], what: str, meter: DerivationMeter | None = None
) -> None:
    """Raise GuardUnavailableError at the first ASCII-only text on which the backend differs from
    HuggingFace: no guard sends such a text to HuggingFace. `what`: for the message."""
    reference, candidate = encoders
    for context in [context for context in contexts if context.template.isascii()]:
        report = scan(reference, {"backend": candidate}, [context], list(range(0x80)), meter=meter)["backend"]
        if not (found := report.divergent[context]):
            continue
        # the code point in its context, alone or between line breaks (as `scan._culprits` frames it)
        text = context.format(chr(found[0]))
        example = f"ASCII text: U+{found[0]:04X} in the context {context.template!r} among the scan's other code points"
        for framed in (text, f"\n{text}\n"):
            if (expected := reference([framed])[0]) != (actual := candidate([framed])[0]):
                example = f"the ASCII text {framed!r} (backend {actual[:12]}, HF {expected[:12]})"
                break
        raise GuardUnavailableError(
            f"{what}: not derived: the backend differs from HuggingFace on {example}, which no guard sends to "
            "HuggingFace; no record written"
        )


def code_points_to_scan(reference: BatchEncoder, candidates: dict[str, BatchEncoder]) -> list[int]:
    """The full planes, plus any screened plane where the screen shows a difference."""
    screened = scan(reference, candidates, SCREEN_CONTEXTS, plane_code_points(SCREENED_PLANES))
    flagged = {code_point >> 16 for report in screened.values() for code_point in report.all_divergent}
    return plane_code_points(set(FULL_PLANES) | flagged)


def run_oracles(
    tokenizer_json: str,
    build_backend: BackendBuilder,
    contexts: list[ScanContext] | None = None,
    code_points: Sequence[int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, ScanReport]:
    """{"ids": report, "boundaries": report (where it applies)}; `code_points`: these, no screen."""
    contexts = derive_contexts(tokenizer_json) if contexts is None else contexts
    oracles = {"ids": tokenizer_json, "boundaries": boundary_tokenizer_json(tokenizer_json)}
    encoders = {oracle: _encoder_pair(text, build_backend) for oracle, text in oracles.items() if text is not None}
    contexts_of = {"ids": core_contexts(contexts), "boundaries": contexts}
    for oracle, pair in encoders.items():
        refuse_inexact_on_ascii(pair, contexts_of[oracle], f"the full derivation (oracle {oracle})")
    reports: dict[str, ScanReport] = {}
    for oracle, (reference, candidate) in encoders.items():
        scanned = code_points if code_points is not None else code_points_to_scan(reference, {oracle: candidate})
        reports[oracle] = scan(
            reference,
            {oracle: candidate},
            contexts_of[oracle],
            scanned,
            progress=None
            if progress is None
            else lambda context, oracle=oracle: progress(f"{oracle}: {context.template!r}"),  # type: ignore[misc]  # python/mypy#15459
        )[oracle]
    return reports


def derive_record(
    key: RecordKey,
    build_backend: BackendBuilder,
    versions: dict[str, str],
    code_points: Sequence[int] | None = None,
    progress: Callable[[str], None] | None = None,
    full: bool = False,
    budget: DerivationBudget = UNBOUNDED,
    served: Encoders | None = None,
    ascii_probed: bool = False,
) -> GuardRecord:
    """The record `key` names (its backend guard family, its tokenizer.json), for `versions`.

    Fast: the screen of the sample, then every candidate run and the run around each code point the
    screen found. `full`: both oracles over the planes `code_points_to_scan` gives. `code_points`:
    these instead, in either. `budget` (fast only): raises DerivationOverBudget past it. `served`:
    this tokenizer's (HF, backend) encode, for the screen. `ascii_probed`: the caller has refused a
    backend wrong on ASCII already."""
    started, tokenizer_json = time.perf_counter(), key.tokenizer_json
    if full:
        contexts = derive_contexts(tokenizer_json)
        reports = run_oracles(tokenizer_json, build_backend, contexts, code_points, progress)
        return _record(key, versions, contexts, reports, "full", started)
    what = f"the {key.family} guard for {describe_pipeline(tokenizer_json)}"
    meter = DerivationMeter(budget, what)  # from here on, all the fast derivation does counts against `budget`
    boundary_json = boundary_tokenizer_json(tokenizer_json)
    oracle = "ids" if boundary_json is None else "boundaries"
    contexts = derive_contexts(tokenizer_json)
    own_encoders = functools.cache(lambda: _encoder_pair(boundary_json or tokenizer_json, build_backend))

    def scanned(
        points: Sequence[int], over: Sequence[ScanContext] = contexts, encoders: Encoders | None = None
    ) -> ScanReport:
        reference, candidate = encoders or own_encoders()
        if progress is not None:
            progress(f"{oracle}: {len(points)} code points x {len(over)} contexts")
        return scan(reference, {oracle: candidate}, over, points, meter=meter)[oracle]

    if code_points is not None:
        refuse_inexact_on_ascii(own_encoders(), contexts, what, meter)
        merged = scanned(code_points)
    else:
        runs = candidate_runs(tokenizer_json)
        samples = sample(FULL_PLANES, runs) + sample(SCREENED_PLANES, runs, FIXED_PLANES_STRIDE)
        screen = served if served is not None and oracle == "ids" else None
        if not ascii_probed:
            refuse_inexact_on_ascii(screen or own_encoders(), contexts, what, meter)
        widened = []
        for point in (found := scanned(samples, SCREEN_CONTEXTS, screen).all_divergent):
            widened.append(run_around(point))
            meter.check(f"the runs around {len(widened)} of the {len(found)} code points the screen found")
        chosen = sorted({point for run in runs for point in representatives(run)})
        merged, mixed = _spread_over_runs(scanned(chosen), runs)
        rest = sorted(from_ranges(mixed + widened) - set(chosen))
        if rest:
            for context, found in scanned(rest).divergent.items():
                merged.divergent[context] = sorted({*merged.divergent.get(context, ()), *found})
        merged.scanned = len(chosen) + len(samples) + len(rest)
    return _record(key, versions, contexts, {oracle: merged}, "fast", started)


def _spread_over_runs(report: ScanReport, runs: list[tuple[int, int]]) -> tuple[ScanReport, list[tuple[int, int]]]:
    """The representatives' scan spread over their runs (every engine reads a run alike); the runs
    whose representatives disagree are returned, to scan whole."""
    contexts_of: dict[int, frozenset[ScanContext]] = {}
    for context, found in report.divergent.items():
        for point in found:
            contexts_of[point] = contexts_of.get(point, frozenset()) | {context}
    spread = ScanReport(
        {context: list(found) for context, found in report.divergent.items()}, report.scanned, report.seconds
    )
    mixed = []
    for run in runs:
        seen = {contexts_of.get(point, frozenset()) for point in representatives(run)}
        if len(seen) > 1:
            mixed.append(run)
        elif seen != {frozenset()} and run[0] != run[1]:
            for context in next(iter(seen)):
                spread.divergent[context] = sorted({*spread.divergent[context], *range(run[0], run[1] + 1)})
    return spread, mixed


def _record(
    key: RecordKey,
    versions: dict[str, str],
    contexts: list[ScanContext],
    reports: dict[str, ScanReport],
    derivation: str,
    started: float,
) -> GuardRecord:
    union = sorted({code_point for report in reports.values() for code_point in report.all_divergent})
    # The pipeline's record where the vocabulary-free oracle found all there was.
    boundaries = set(reports["boundaries"].all_divergent) if "boundaries" in reports else None
    model_scope = boundaries is None or not set(union) <= boundaries
    return {
        "format": RECORD_FORMAT,
        "backend": key.family,
        "scope": "model" if model_scope else "pipeline",
        "pipeline": key.pipeline,
        "pipeline_description": describe_pipeline(key.tokenizer_json),
        "model_fingerprint": key.model if model_scope else None,
        **({"vocabulary_fingerprint": key.vocabulary} if model_scope else {}),
        "applies_to": [versions],
        "derivation": derivation,
        "derived_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "scan_seconds": round(time.perf_counter() - started, 1),
        "code_points_scanned": max(report.scanned for report in reports.values()),
        "contexts": [[context.template, context.family] for context in contexts],
        "code_points": [list(pair) for pair in ranges(union)],
        "found_by": {
            oracle: {family: [list(pair) for pair in ranges(found)] for family, found in report.by_family().items()}
            for oracle, report in reports.items()
        },
    }
