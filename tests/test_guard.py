"""The Unicode divergence guard: derived contexts, both oracles, records, the derivation lock, the
guard on the encode path, and that each of these gates fails on a planted defect of its class."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LONG, MIXED_TEXTS
from defects import FirstThousandCharacters, OneTextWrongOnVai, serve_with_guard
from hypothesis import settings

import tokbackend
from tokbackend import FastPathError
from tokbackend import _guard as guard_module
from tokbackend._guard import GuardSettings, UnicodeGuard, model_fingerprint
from tokbackend._guard.contexts import derive_contexts
from tokbackend._guard.derive import core_contexts, run_oracles
from tokbackend._guard.records import BAKED_RECORDS_ENV, find_record, pipeline_fingerprint, record_key, write_record
from tokbackend._guard.scan import ScanContext, from_ranges, plane_code_points, scan
from tokbackend.backends import backend_class
from tokbackend.backends._hf import HFBackend
from tokbackend.equivalence.corpus import prompt_text
from tokbackend.equivalence.differential import find_mismatch
from tokbackend.equivalence.strategies import EXAMPLES, input_classes
from tokbackend.equivalence.vocabularies import vocabulary_dir

HELPERS = Path(__file__).parent / "helpers"


LETTER_X = 0x323B0  # CJK Extension J (Unicode 17): a letter to gigatoken, unassigned to HF tokenizers


EXTENSION_J = list(range(0x323B0, 0x32400))


STABLE = list(range(0x4E00, 0x4E40)) + list(range(0x0400, 0x0440))  # old CJK and Cyrillic letters


FAKE_VERSIONS = {"tokenizers": "9.9.9", "gigatoken": "9.9.9"}


# The contexts of the first guard, written by hand; kept here to show what they missed.
LEGACY_CONTEXTS = [
    ScanContext(template, "legacy")
    for template in (
        "{0}",
        "a{0}",
        "{0}a",
        " {0}",
        "{0}{0}",
        "1{0}",
        "\u0915{0}",
        "\u4e2d{0}\u6587",
        " {0}{0}{0}x",
        "a\u0300\u0300{0}",
        "a{0}\u0316",
    )
]


def _json(tokenizer) -> str:
    return tokenizer.backend_tokenizer.to_str()


def _gigatoken(text: str):
    kind = backend_class("gigatoken")
    return kind(text, kind.options_for_scanning())


# -- contexts ---------------------------------------------------------------------------------


def test_contexts_follow_each_pattern():
    qwen36 = derive_contexts(_json(tokbackend.load_hf("qwen3.6")))
    o200k = derive_contexts((vocabulary_dir("o200k-split") / "tokenizer.json").read_text())
    llama3 = derive_contexts((vocabulary_dir("llama3-split") / "tokenizer.json").read_text())
    templates = {
        name: {context.template for context in contexts}
        for name, contexts in (("qwen", qwen36), ("o200k", o200k), ("llama3", llama3))
    }
    for name in templates:  # each contraction alternative, before and in place of a letter
        assert {"{0}'s", "{0}'ll", "{0}'re", "'{0}", "'r{0}"} <= templates[name], name
    # o200k distinguishes letter case classes and names '/' literally; Qwen and Llama 3 do not
    assert any("\u01c5" in template for template in templates["o200k"])  # Lt
    assert any("\u02b0" in template for template in templates["o200k"])  # Lm
    assert any("/" in template for template in templates["o200k"])
    assert not any("\u01c5" in template for template in templates["qwen"])
    # digit runs one longer than the pattern's grouping
    assert "1111{0}1111" in templates["llama3"]
    # a composing normalizer gets reordering contexts with combining classes 1 and 240
    assert {"e{0}\u0334", "a\u0345{0}"} <= templates["qwen"]
    without_nfc = json.loads(_json(tokbackend.load_hf("qwen3")))
    without_nfc["normalizer"] = None
    assert not [context for context in derive_contexts(json.dumps(without_nfc)) if context.family == "normalizer"]


def test_legacy_contexts_miss_the_contraction_class_the_derived_contexts_find():
    text = _json(tokbackend.load_hf("qwen3.6"))
    reference, backend = HFBackend(text).encode_batch, _gigatoken(text).encode_batch
    legacy = scan(reference, {"raw": backend}, LEGACY_CONTEXTS, EXTENSION_J)["raw"]
    derived = scan(reference, {"raw": backend}, core_contexts(derive_contexts(text)), EXTENSION_J)["raw"]
    assert legacy.all_divergent == []
    assert derived.all_divergent == EXTENSION_J
    assert "contractions" in derived.by_family()


# -- the two oracles and the scan -------------------------------------------------------------


@pytest.mark.parametrize("model", ["qwen3.6", "llama3-split", "o200k-split"])
def test_each_oracle_alone_finds_the_letter_class(model):
    directory = vocabulary_dir(model) if model.endswith("-split") else None
    text = (directory / "tokenizer.json").read_text() if directory else _json(tokbackend.load_hf(model))
    reports = run_oracles(text, _gigatoken, code_points=EXTENSION_J[:16] + STABLE)
    assert set(reports) == {"ids", "boundaries"}
    for oracle, report in reports.items():
        assert report.all_divergent == EXTENSION_J[:16], oracle


def test_the_boundary_oracle_finds_fastokens_case_folding_difference(hf_tokenizer):
    """fastokens' one divergence: PCRE2's caseless (?i:'s) matches 'ſ (U+017F). Qwen's merges hide
    it from the ids oracle; the boundary oracle's case-folding contexts show it, and nothing else."""
    kind = backend_class("fastokens")
    text = _json(hf_tokenizer)
    contexts = [context for context in derive_contexts(text) if context.family == "case_folding"]
    reports = run_oracles(
        text, lambda json_text: kind(json_text, kind.options_for_scanning()), contexts, [0x17F, 0x73, 0x53] + STABLE
    )
    assert reports["boundaries"].all_divergent == [0x17F]
    assert reports["ids"].all_divergent == []


def test_boundary_oracle_sees_what_the_real_vocabulary_hides(hf_tokenizer):
    """Next to an ASCII letter the real merges hide the letter class; the boundary vocabulary does not."""
    text = _json(hf_tokenizer)
    context = [ScanContext("a{0}", "letters")]
    reports = run_oracles(text, _gigatoken, contexts=context, code_points=EXTENSION_J[:16] + STABLE)
    assert reports["ids"].all_divergent == []
    assert reports["boundaries"].all_divergent == EXTENSION_J[:16]


def _hf_batch(hf_tokenizer):
    return HFBackend(hf_tokenizer.backend_tokenizer.to_str()).encode_batch


def test_scan_names_the_code_points_that_differ(hf_tokenizer):
    reference = _hf_batch(hf_tokenizer)
    planted = {0x00E9, 0x4E2D}

    def wrong(texts):
        return [
            ids + [0] if any(chr(code_point) in text for code_point in planted) else ids
            for text, ids in zip(texts, reference(texts))
        ]

    report = scan(
        reference,
        {"wrong": wrong},
        code_points=list(range(0x00C0, 0x0100)) + list(range(0x4E00, 0x4E40)),
        contexts=[ScanContext("a{0}", "letters")],
    )
    assert set(report["wrong"].all_divergent) == planted
    assert len(plane_code_points(range(17))) == 0x110000 - 0x800


# -- records ----------------------------------------------------------------------------------


SUPPORTED_VERSIONS = ("0.22.2", "0.23.2", "0.23.3")
# The pipelines people serve (issue 18's list); each ships a record per backend that loads it.
SHIPPED_FAMILIES = (
    "qwen3",
    "qwen3.5",
    "llama3",
    "deepseek-v3",
    "kimi-k2",
    "gpt-oss",
    "gpt-4o",
    "cl100k",
    "tekken",
    "gpt2",
    "modernbert",
)
LOADS = {"gigatoken": set(SHIPPED_FAMILIES) - {"kimi-k2"}, "fastokens": set(SHIPPED_FAMILIES)}


def _record_for(tokenizer_json: str, family: str, versions: dict, cache) -> dict | None:
    return find_record(record_key(tokenizer_json, family), cache, versions)[0]


def test_fingerprint_reads_sections_without_parsing_the_vocabulary(hf_tokenizer):
    """The textual fingerprint: the same for another key order and other added tokens, another for other merges."""
    import json

    text = _json(hf_tokenizer)
    spec = json.loads(text)
    fingerprint = model_fingerprint(text)

    def as_hf_writes(sections: dict) -> str:
        return json.dumps(sections, separators=(",", ":"), ensure_ascii=False)

    others = {key: value for key, value in spec.items() if key != "model"}
    assert model_fingerprint(as_hf_writes({"model": spec["model"], **others})) == fingerprint  # full-parse path
    assert model_fingerprint(as_hf_writes({**spec, "added_tokens": []})) == fingerprint
    spec["model"]["merges"] = spec["model"]["merges"][:-1]
    assert model_fingerprint(as_hf_writes(spec)) != fingerprint


def test_a_record_is_keyed_by_the_pipeline_not_the_vocabulary():
    """What decides the divergence is the normalizer and pre-tokenizer: other vocabularies and
    added tokens keep the key, offsets-only fields too; another normalizer or regex does not."""
    import json

    from tokbackend.equivalence.families import build_family

    real, small = (build_family("llama3", vocabulary).backend_tokenizer.to_str() for vocabulary in ("real", "small"))
    assert pipeline_fingerprint(real) == pipeline_fingerprint(small)
    spec = json.loads(small)
    spec["pre_tokenizer"]["pretokenizers"][-1]["trim_offsets"] = not spec["pre_tokenizer"]["pretokenizers"][-1][
        "trim_offsets"
    ]
    assert pipeline_fingerprint(json.dumps(spec)) == pipeline_fingerprint(small)
    spec["normalizer"] = {"type": "NFC"}
    assert pipeline_fingerprint(json.dumps(spec)) != pipeline_fingerprint(small)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("backend", ["gigatoken", "fastokens"])
def test_records_ship_for_the_pipelines_and_versions_users_run(backend, version, tmp_path):
    from tokbackend.equivalence.families import build_family

    versions = {"tokenizers": version, backend: {"gigatoken": "0.10.0", "fastokens": "0.3.5"}[backend]}
    missing = [
        family
        for family in sorted(LOADS[backend])
        if _record_for(build_family(family, "small").backend_tokenizer.to_str(), backend, versions, tmp_path) is None
    ]
    assert not missing, f"no shipped {backend} record for {versions}: {missing}"
    for model in ("qwen3", "qwen3.6"):
        record = _record_for(_json(tokbackend.load_hf(model)), backend, versions, tmp_path)
        assert record is not None and record["matched"] == "pipeline"
        assert {"gigatoken": LETTER_X, "fastokens": 0x17F}[backend] in from_ranges(record["code_points"])


def test_the_same_vocabulary_built_another_way_finds_the_shipped_record(monkeypatch, tmp_path):
    """Qwen3 as its published tokenizer.json lays it out (other ByteLevel flags, other key
    order) is the built-in one's pipeline: no derivation."""
    from tokbackend._guard import derive
    from tokbackend.equivalence.families import build_family

    monkeypatch.setattr(derive, "derive_record", lambda *args, **kwargs: pytest.fail("derived although a record ships"))
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    for backend in ("gigatoken", "fastokens"):
        fast = tokbackend.accelerate(build_family("qwen3", "real"), backend)
        assert fast.tokbackend.stats()["guard_record"].startswith(str(guard_module.records.SHIPPED_RECORDS))


def test_accelerate_runs_no_scan_with_a_shipped_record(hf_tokenizer, monkeypatch):
    from tokbackend._guard import derive

    monkeypatch.setattr(derive, "derive_record", lambda *args, **kwargs: pytest.fail("derived although a record ships"))
    fast = tokbackend.accelerate(hf_tokenizer, "gigatoken")
    assert fast.tokbackend.stats()["guard_record"].startswith(str(guard_module.records.SHIPPED_RECORDS))
    assert "matched by pipeline" in fast.tokbackend.stats()["guard"]


def test_a_baked_record_is_used_without_a_scan(fresh_pair, monkeypatch, tmp_path):
    hf, reference = fresh_pair
    from tokbackend._guard import derive

    shipped = reference.tokbackend.guard.record
    baked = {**shipped, "applies_to": [FAKE_VERSIONS]}
    write_record(baked, tmp_path / "baked")
    monkeypatch.setattr(guard_module, "guard_versions", lambda libraries: FAKE_VERSIONS)
    monkeypatch.setattr(
        derive, "derive_record", lambda *args, **kwargs: pytest.fail("derived although a record was baked")
    )
    monkeypatch.setenv(BAKED_RECORDS_ENV, str(tmp_path / "baked"))
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    fast = tokbackend.accelerate(hf, "gigatoken")
    assert fast.tokbackend.guard.code_points == reference.tokbackend.guard.code_points
    assert fast.tokbackend.stats()["guard_record"].startswith(str(tmp_path / "baked"))


def test_a_record_of_the_earlier_format_keeps_working(fresh_pair, monkeypatch, tmp_path):
    """A record baked before records were keyed by pipeline (format 2, keyed by the whole model)."""
    hf, reference = fresh_pair
    legacy = json.loads((FULL_SCANS / "qwen3-gigatoken.json").read_text())
    assert legacy["format"] == 2
    monkeypatch.setattr(guard_module, "guard_versions", lambda libraries: FAKE_VERSIONS)
    write_record({**legacy, "model_fingerprint": model_fingerprint(_json(hf)), "applies_to": [FAKE_VERSIONS]}, tmp_path)
    monkeypatch.setenv(BAKED_RECORDS_ENV, str(tmp_path))
    fast = tokbackend.accelerate(hf, "gigatoken", unicode_guard="refuse")
    assert fast.tokbackend.fast_path_enabled and "earlier format" in fast.tokbackend.stats()["guard"]
    assert fast.tokbackend.guard.code_points == from_ranges(legacy["code_points"])


def test_a_record_is_never_applied_to_a_pipeline_it_does_not_match(monkeypatch):
    """A planted defect: a key that ignores the normalizer. Then a tokenizer with Qwen's NFC
    and Llama 3's split regex gets Llama 3's record, which lacks the code points NFC composes
    differently, and the harness's pinned combining-marks input shows wrong ids."""
    from tokbackend._guard import records

    hf = _vocabulary_tokenizer("llama3-split")  # Qwen3's ranks, NFC, Llama 3's split regex
    text = EXAMPLES["combining_marks"][0]
    exact = tokbackend.accelerate(hf, "gigatoken")
    assert exact.encode(text) == hf.encode(text)
    real = records.pipeline_fingerprint

    def ignores_the_normalizer(tokenizer_json):
        spec = json.loads(tokenizer_json)
        return real(json.dumps({**spec, "normalizer": None}))

    monkeypatch.setattr(records, "pipeline_fingerprint", ignores_the_normalizer)
    planted = tokbackend.accelerate(hf, "gigatoken")
    assert planted.encode(text) != hf.encode(text)


# -- the fast derivation ------------------------------------------------------------------------

# Full two-oracle scans of every code point, recorded with tokenizers 0.23.x (the records tokbackend
# shipped before the fast derivation): what it must find, exactly.
FULL_SCANS = Path(__file__).parent / "guards" / "full-scan"


def _fast(tokenizer_json: str, backend: str, **kwargs) -> dict:
    from tokbackend._guard import derive, guard_versions

    kind = backend_class(backend)
    build = lambda text: kind(text, kind.options_for_scanning())  # noqa: E731
    key = record_key(tokenizer_json, kind.guard_family)
    return derive.derive_record(key, build, guard_versions(kind.versioned_libraries), **kwargs)


@pytest.mark.parametrize("backend", ["gigatoken", "fastokens"])
@pytest.mark.parametrize("model", ["qwen3.6", "qwen3", "llama3-split", "o200k-split"])
def test_the_fast_derivation_finds_exactly_what_the_full_scan_found(model, backend):
    import resource
    import time

    tokenizer = tokbackend.load_hf(model) if model.startswith("qwen") else _vocabulary_tokenizer(model)
    text = _json(tokenizer)
    # CPU time of this process (its threads included), which a loaded machine does not stretch
    # as it stretches the wall clock
    rss, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time()
    record = _fast(text, backend)
    cpu_seconds, growth_mib = (
        time.process_time() - started,
        (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024,
    )
    full = json.loads((FULL_SCANS / f"{model}-{backend}.json").read_text())
    assert from_ranges(record["code_points"]) == from_ranges(full["code_points"])
    assert record["scope"] == "pipeline"
    # 10 s and 500 MB on an idle 2-core machine (bench/guard_derivation.py): at most 20 CPU seconds, and slack
    assert cpu_seconds < 60 and growth_mib < 500, (cpu_seconds, growth_mib)


@pytest.mark.parametrize(
    "defect, backend",
    [("no case relatives", "fastokens"), ("no changed runs", "gigatoken"), ("representatives only", "gigatoken")],
)
def test_a_fast_derivation_that_misses_a_class_is_caught(defect, backend, monkeypatch):
    """Planted defects in the candidates: without the case relatives of the pattern's letters
    (fastokens' U+017F), without the runs of changed code points (gigatoken's letters), or with
    representatives that speak for nothing but themselves: the comparison above fails."""
    from tokbackend._guard import contexts, derive

    if defect == "no case relatives":
        real = contexts.rule_sensitive
        monkeypatch.setattr(contexts, "rule_sensitive", lambda name: [] if name.startswith("case") else real(name))
    elif defect == "no changed runs":
        monkeypatch.setattr(contexts, "changed_runs", lambda: [])
    else:
        monkeypatch.setattr(derive, "_spread_over_runs", lambda report, runs: (report, []))
    record = _fast(_json(tokbackend.load_hf("qwen3.6")), backend)
    full = json.loads((FULL_SCANS / f"qwen3.6-{backend}.json").read_text())
    assert from_ranges(record["code_points"]) != from_ranges(full["code_points"])


@pytest.mark.slow  # a full scan per pipeline and backend: ~4 min each on 2 cores
@pytest.mark.parametrize(
    "family", ["qwen3.5", "llama3", "deepseek-v3", "kimi-k2", "gpt-oss", "cl100k", "tekken", "gpt2", "modernbert"]
)
def test_the_fast_derivation_equals_the_full_scan_on_every_pipeline(family):
    """The fast derivation against today's full two-oracle scan, with the real vocabulary and a
    small one: the same code points (the vocabulary decides nothing)."""
    from tokbackend._guard import guard_versions
    from tokbackend._guard.derive import derive_record
    from tokbackend.equivalence.families import build_family

    for backend in sorted(LOADS):
        if family not in LOADS[backend]:
            continue
        kind = backend_class(backend)
        found = set()
        for vocabulary in ("real", "small"):
            text = build_family(family, vocabulary).backend_tokenizer.to_str()
            build = lambda json_text, kind=kind: kind(json_text, kind.options_for_scanning())  # noqa: E731
            full = derive_record(record_key(text, backend), build, guard_versions(kind.versioned_libraries), full=True)
            assert from_ranges(_fast(text, backend)["code_points"]) == from_ranges(full["code_points"]), (
                family,
                backend,
                vocabulary,
            )
            found.add(frozenset(from_ranges(full["code_points"])))
        assert len(found) == 1, f"{family}, {backend}: the real and the small vocabulary find different code points"


def test_write_record_merges_versions_with_the_same_result(tmp_path, fresh_pair):
    _, fast = fresh_pair
    record = {**fast.tokbackend.guard.record, "applies_to": [FAKE_VERSIONS]}
    other = {**record, "applies_to": [{"tokenizers": "0.0.1", "gigatoken": "0.0.1"}]}
    first, second = write_record(record, tmp_path), write_record(other, tmp_path)
    assert first == second
    assert json.loads(first.read_text())["applies_to"] == [FAKE_VERSIONS, {"tokenizers": "0.0.1", "gigatoken": "0.0.1"}]


SMALL = GuardSettings(code_points=(*EXTENSION_J[:64], *range(0x1AC0, 0x1B00), *STABLE))


@pytest.fixture
def small_derivation(monkeypatch, tmp_path):
    """Derivations in these tests scan a few blocks that hold known divergences (`SMALL`), with
    fake versions (planted: the installed libraries changed since every record was derived)."""
    monkeypatch.setattr(guard_module, "guard_versions", lambda libraries: FAKE_VERSIONS)
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_guard_is_rederived_when_library_versions_change(fresh_pair, small_derivation, caplog):
    hf, reference = fresh_pair
    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, "gigatoken", cache_budget_mib=16, guard=SMALL)
    assert any("deriving the Unicode divergence guard" in record.getMessage() for record in caplog.records)
    records = list((small_derivation / "guards").glob("gigatoken-*.json"))
    assert len(records) == 1
    assert json.loads(records[0].read_text())["applies_to"] == [FAKE_VERSIONS]
    derived = fast.tokbackend.guard.code_points
    scanned = set(SMALL.code_points or ())
    assert derived == reference.tokbackend.guard.code_points & scanned  # agrees with the shipped record there
    assert {LETTER_X, 0x1AE6} <= derived
    # the derivation used its own backends: its encodes never counted toward the serving budget
    assert fast.tokbackend.stats()["cache_renewals"] == 0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        tokbackend.accelerate(hf, "gigatoken")
    assert not any("deriving" in record.getMessage() for record in caplog.records)


def test_a_derivation_guards_what_a_backends_single_text_calls_get_wrong(
    fresh_pair, small_derivation, register_for_test
):
    """The scan compares every call form a lane serves: a backend right in batches but wrong in
    its single-text calls on U+A501 gets that code point guarded (before: the scan read batches
    alone, so the guard missed it and one-text calls served wrong ids)."""
    register_for_test(OneTextWrongOnVai.name, OneTextWrongOnVai)
    hf, _ = fresh_pair
    settings = GuardSettings(code_points=(0xA500, 0xA501, 0xA502, *range(0x1AC0, 0x1B00)))
    fast = tokbackend.accelerate(hf, OneTextWrongOnVai.name, guard=settings)
    assert fast.tokbackend.fast_path_enabled
    assert 0xA501 in fast.tokbackend.guard.code_points and 0xA500 not in fast.tokbackend.guard.code_points
    for text in ("\ua501", "a \ua501\ua502 b", "\ua500\ua502"):
        assert fast.encode(text) == hf.encode(text)


def test_guard_refuses_loudly_when_asked_to(fresh_pair, small_derivation, caplog):
    hf, _ = fresh_pair
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        fast = tokbackend.accelerate(hf, "gigatoken", unicode_guard="refuse")
    assert not fast.tokbackend.fast_path_enabled
    assert any("tokbackend guard" in record.getMessage() for record in caplog.records)
    assert fast.encode("still exact") == hf.encode("still exact")
    with pytest.raises(FastPathError, match="no guard record|recorded for"):
        tokbackend.accelerate(hf, "gigatoken", unicode_guard="refuse", strict=True)


@pytest.mark.slow  # four processes deriving a full guard on 2 cores: ~45 s
def test_concurrent_processes_derive_once_and_share_the_record(tmp_path):
    """Three processes start at once with no record: one derives, two wait and reuse it."""
    children = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "derive_concurrently.py"), str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = []
    for child in children:
        stdout, stderr = child.communicate(timeout=600)
        assert child.returncode == 0, stderr[-2000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert sorted(result["derived"] for result in results) == [False, False, True]
    assert len({result["guard"] for result in results}) == 1
    assert len(list((tmp_path / "guards").glob("gigatoken-*.json"))) == 1


# -- the guard on the encode path -------------------------------------------------------------


def test_guarded_text_is_exact_and_counted(hf_tokenizer, fast_tokenizer):
    """A guarded text no call sent before goes to HF and is counted once per text. Its repeats
    are exact whether HF answers them again or the segment cache with the HF ids it kept (this
    shared tokenizer's cache may be stepping aside; `test_segments.py` counts the cache's reuse)."""
    texts = [*MIXED_TEXTS[:-1], MIXED_TEXTS[-1] + " (test_guarded_text_is_exact_and_counted)"]
    assert fast_tokenizer.tokbackend.guard.needs_hf(texts[-1])

    def fallbacks() -> int:
        return fast_tokenizer.tokbackend.stats()["fallbacks"].get("unicode_guard", 0)

    before = fallbacks()
    expected = [hf_tokenizer.encode(text) for text in texts]
    assert fast_tokenizer(texts)["input_ids"] == expected
    assert fallbacks() == before + 1
    for repeat in range(3):
        assert fast_tokenizer(texts)["input_ids"] == expected
        assert before + 1 <= fallbacks() <= before + 2 + repeat


def test_guard_is_cheap_to_skip_for_ascii_and_flags_only_divergent_code_points(fast_tokenizer):
    guard = fast_tokenizer.tokbackend.guard
    assert not guard.needs_hf(prompt_text(1, 50_000, "code").encode("ascii", "ignore").decode())
    assert not guard.needs_hf(prompt_text(1, 50_000, "prose"))
    for code_point in sorted(guard.code_points)[:20]:
        assert guard.needs_hf("plain text " + chr(code_point) + " more")


def test_the_screen_flags_every_divergent_code_point_in_long_mixed_text_and_no_other(fast_tokenizer):
    """The table lookup reads only code points from the smallest divergent one up: each divergent
    one (the smallest and largest included) is found deep in long mixed text, and code points
    around and between them that do not diverge are not."""
    guard = fast_tokenizer.tokbackend.guard
    divergent = sorted(guard.code_points)
    assert divergent, "the built-in models' guards hold code points on both backends"
    text = prompt_text(3, 20_000, "mixed")
    assert not guard.needs_hf(text)
    for code_point in divergent:
        assert guard.needs_hf(text + chr(code_point)), hex(code_point)
    around = range(max(divergent[0] - 64, 0), 0x110000, 97)
    others = [c for c in around if c not in guard.code_points and not 0xD800 <= c < 0xE000]
    assert others and not any(guard.needs_hf(chr(c) + text) for c in others)


def _deep_text(code_point: int, where: float = 0.95) -> str:
    text = prompt_text(7, 100_000, "mixed")
    cut = int(len(text) * where)
    return text[:cut] + f" {chr(code_point)}'s " + text[cut:]


@pytest.mark.parametrize("call", ["single", "batch"])
def test_divergent_code_points_deep_in_long_prompts_are_exact(hf_tokenizer, fast_tokenizer, call):
    guarded = fast_tokenizer.tokbackend.guard.code_points
    deep = _deep_text(LETTER_X if LETTER_X in guarded else min(guarded))  # fastokens: U+017F
    texts = [prompt_text(3, 20_000, "code"), deep]

    def encode(tokenizer):
        return tokenizer.encode(deep) if call == "single" else tokenizer(texts)["input_ids"]

    expected = hf_tokenizer.encode(deep) if call == "single" else [hf_tokenizer.encode(text) for text in texts]
    before = fast_tokenizer.tokbackend.stats()
    assert encode(fast_tokenizer) == expected
    after = fast_tokenizer.tokbackend.stats()
    assert after["fallbacks"]["unicode_guard"] == before["fallbacks"].get("unicode_guard", 0) + 1
    assert after["fast_texts"] == before["fast_texts"] + (
        0 if call == "single" else 1
    )  # only what the backend answered
    # the same inputs catch a guard that reads only the first 1,000 characters
    deep = _deep_text(LETTER_X)
    texts[1] = deep
    expected = hf_tokenizer.encode(deep) if call == "single" else [hf_tokenizer.encode(text) for text in texts]
    planted = tokbackend.accelerate(hf_tokenizer, "gigatoken")
    serve_with_guard(planted, FirstThousandCharacters(planted.tokbackend.guard.code_points))
    assert encode(planted) != expected


def _letter_class(fast_tokenizer) -> frozenset[int]:
    """The code points the guard holds because gigatoken reads them as letters and HF does not."""
    return from_ranges(fast_tokenizer.tokbackend.guard.record["found_by"]["boundaries"]["contractions"])


def test_recent_code_points_class_catches_a_guard_missing_the_letter_class(hf_tokenizer):
    planted = tokbackend.accelerate(hf_tokenizer, "gigatoken")
    guard = planted.tokbackend.guard
    serve_with_guard(planted, UnicodeGuard(guard.code_points - _letter_class(planted), guard.record))
    strategy = input_classes([])["recent_code_points"]()
    # a class name without pinned examples: the strategy alone must find it
    mismatch = find_mismatch(hf_tokenizer.encode, planted.encode, strategy, "unpinned", settings.get_profile("ci"))
    assert mismatch is not None
    assert any(ord(character) in _letter_class(planted) for character in mismatch.text)


# -- every code point, through the accelerated tokenizer --------------------------------------


def _full_scan(hf_tokenizer, fast_tokenizer):
    from tokbackend._guard.derive import FULL_PLANES

    return scan(
        _hf_batch(hf_tokenizer),
        {
            "raw": fast_tokenizer.tokbackend.backend.encode_batch,
            "accelerated": lambda texts: fast_tokenizer(texts, add_special_tokens=False)["input_ids"],
        },
        derive_contexts(hf_tokenizer.backend_tokenizer.to_str()),
        plane_code_points(FULL_PLANES),
    )


@pytest.mark.slow
def test_every_code_point_is_exact_through_the_accelerated_tokenizer(hf_tokenizer, fast_tokenizer):
    """The full scan in every derived context (CI runs it for Qwen3.6 through `tokbackend verify`)."""
    results = _full_scan(hf_tokenizer, fast_tokenizer)
    assert results["accelerated"].all_divergent == []
    raw = set(results["raw"].all_divergent)
    guard = fast_tokenizer.tokbackend.guard
    if any(guard.by_class().get("ids", {}).values()):
        # the record's ids oracle saw wrong ids with this vocabulary: the raw backend must still
        # give some, or the record is stale
        assert raw, "the raw backend no longer diverges anywhere: the guard's records are stale"
    # else only the boundaries oracle found the class (fastokens: U+017F, which Qwen's merges
    # hide; `test_the_boundary_oracle_finds_fastokens_case_folding_difference` covers it)
    assert raw <= guard.code_points


@pytest.mark.slow
@pytest.mark.parametrize("vocabulary", ["llama3-split", "o200k-split"])
def test_every_code_point_is_exact_for_other_split_patterns(vocabulary, monkeypatch):
    hf = _vocabulary_tokenizer(vocabulary)
    fast = tokbackend.accelerate(hf, "gigatoken")
    results = _full_scan(hf, fast)
    assert results["accelerated"].all_divergent == []
    assert set(results["raw"].all_divergent) <= fast.tokbackend.guard.code_points


@pytest.mark.parametrize("vocabulary", ["llama3-split", "o200k-split"])
@pytest.mark.parametrize("input_class", ["recent_code_points", "contractions", "any_text", "digit_runs"])
def test_other_split_patterns_are_exact_for_boundary_classes(vocabulary, input_class, monkeypatch):
    hf = _vocabulary_tokenizer(vocabulary)
    fast = tokbackend.accelerate(hf, "gigatoken")
    strategy = input_classes([])[input_class]()
    mismatch = find_mismatch(hf.encode, fast.encode, strategy, input_class, settings.get_profile("ci"))
    assert mismatch is None, mismatch.report()
    assert fast.tokbackend.stats()["fast_texts"] > 0


_vocabularies: dict[str, object] = {}


def _vocabulary_tokenizer(name: str):
    if name not in _vocabularies:
        _vocabularies[name] = tokbackend.load_hf(str(vocabulary_dir(name)))
    return _vocabularies[name]


def test_a_record_found_again_adds_its_versions_to_the_one_on_disk_and_keeps_its_labels(tmp_path):
    """A shipped record's labels ("families", "models") are written by hand; a derivation that
    finds the same code points again adds only the versions it ran on."""
    found = {
        "format": 3,
        "backend": "gigatoken",
        "scope": "pipeline",
        "pipeline": "p" * 64,
        "code_points": [[768, 769]],
    }
    first = write_record(
        {**found, "applies_to": [{"gigatoken": "1"}], "families": "qwen3", "models": "Qwen3"}, tmp_path
    )
    again = write_record({**found, "applies_to": [{"gigatoken": "2"}]}, tmp_path)
    assert again == first and len(list(tmp_path.glob("*.json"))) == 1
    merged = json.loads(first.read_text(encoding="utf-8"))
    assert merged["applies_to"] == [{"gigatoken": "1"}, {"gigatoken": "2"}]
    assert (merged["families"], merged["models"]) == ("qwen3", "Qwen3")


def test_a_damaged_guard_record_is_a_miss_named_then_written_anew(monkeypatch, tmp_path, caplog):
    """A record cut short (a disk that filled, a half-copied image) or of the wrong shape does not
    stop a start: a WARNING names the file, the guard is derived again and the record written
    anew (before, the servers' build raised JSONDecodeError or AttributeError until someone
    deleted the file)."""
    from transformers import PreTrainedTokenizerFast

    from tokbackend.equivalence.server_models import own_pipeline_model

    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    model = PreTrainedTokenizerFast(tokenizer_file=str(own_pipeline_model(tmp_path / "own-model") / "tokenizer.json"))
    first = tokbackend.accelerate(model, "fastokens")
    record = Path(first.tokbackend.stats()["guard_record"])
    assert record.parent == tmp_path / "cache" / "guards", record
    for damaged in (record.read_text()[:100], "[1, 2]"):
        record.write_text(damaged)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tokbackend"):
            again = tokbackend.accelerate(model, "fastokens")
        named = [entry.getMessage() for entry in caplog.records if str(record) in entry.getMessage()]
        assert named and ("is damaged" in named[0] or "not an object" in named[0]), named
        assert again.encode(LONG) == model.encode(LONG)
        assert isinstance(json.loads(Path(again.tokbackend.stats()["guard_record"]).read_text()), dict)
