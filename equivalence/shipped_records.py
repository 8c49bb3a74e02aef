"""Derive the guard records tokbackend ships: one per pipeline people serve, per backend, per
set of library versions.

Every pipeline of `tokbackend.equivalence.families` (the published normalizer and pre-tokenizer sections of
Qwen2/2.5/3, Qwen3.5/3.6, Llama 3.x and GLM-4, DeepSeek-V3/R1/V4, Kimi-K2, gpt-oss, GPT-4o,
cl100k, Phi-4, Mistral Tekken, MiniMax, GPT-2, ModernBERT, ...) and the built-in models are
derived for every backend that loads them, with the versions installed in this environment, and
written into `tokbackend/_guard/shipped/` (a record that finds what one already there found gets
these versions added to it). A pipeline record depends on the pipeline only, so the family's
small vocabulary serves. Run once in each environment the servers pin (tokenizers 0.22.2 with
transformers 5.12.1, 0.23.2 with 5.19.0, 0.23.3 with the newest), from the repository root:

    python -m tokbackend.equivalence.shipped_records
"""

from __future__ import annotations

import sys

from tokbackend._guard import guard_versions
from tokbackend._guard.derive import derive_record
from tokbackend._guard.records import SHIPPED_RECORDS, record_key, write_record
from tokbackend._routing.auto import candidates
from tokbackend.backends import BackendUnavailableError, backend_class

from .families import FAMILY_NAMES, PIPELINES, build_family


def _sources() -> list[tuple[str, str, str]]:
    """(label, tokenizer.json, models) of every pipeline to ship."""
    import tokbackend

    found = [
        (family, build_family(family, "small").backend_tokenizer.to_str(), ", ".join(PIPELINES[family].models))
        for family in FAMILY_NAMES
    ]
    for name, models in (("qwen3", "built-in qwen3"), ("qwen3.6", "built-in qwen3.6")):
        found.append((name, tokbackend.load_hf(name).backend_tokenizer.to_str(), models))
    return found


def main() -> None:
    for label, tokenizer_json, models in _sources():
        for name in candidates():
            kind = backend_class(name)
            if not kind.needs_unicode_guard:
                continue
            try:
                kind(tokenizer_json, kind.options_for_scanning())
            except BackendUnavailableError:
                continue
            versions = guard_versions(tuple(kind.versioned_libraries))
            key = record_key(tokenizer_json, kind.guard_family)
            record = derive_record(key, lambda text, kind=kind: kind(text, kind.options_for_scanning()), versions)
            if record["scope"] != "pipeline":
                continue  # the model's own vocabulary decides it: derived on the replica, per model
            path = write_record({**record, "families": label, "models": models}, SHIPPED_RECORDS)
            found = f"{len(record['code_points']):4d} ranges in {record['scan_seconds']:4.1f} s"
            print(f"{label:18s} {name:10s} {found} {versions} {path.name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
