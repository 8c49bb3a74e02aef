"""Guard records on disk: where they are looked up, what they are valid for, and the
cross-process lock that makes one process per machine derive a missing one.

A record is keyed by backend name and model fingerprint (normalizer, pre-tokenizer, model:
what decides Unicode handling; added tokens are left out) and lists every set of library
versions it was derived on (`applies_to`): one derivation serves every version whose scan
gave the same code points. Lookup order: a baked directory ($TOKBACKEND_GUARD_DIR, written by
`tokbackend guard MODEL --output DIR`), the records shipped in the package, the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tokbackend.tokenizer_json import top_level_sections

SHIPPED_RECORDS = Path(__file__).parent / "shipped"
BAKED_RECORDS_ENV = "TOKBACKEND_GUARD_DIR"
# Bumped whenever the derivation changes what it finds, so older records are re-derived.
RECORD_FORMAT = 2


def installed_versions(libraries: tuple[str, ...]) -> dict[str, str]:
    """The installed versions of `libraries` (a backend's and HF tokenizers')."""
    versions = {}
    for library in libraries:
        try:
            versions[library] = version(library)
        except PackageNotFoundError:
            versions[library] = "not installed"
    return versions


def model_fingerprint(tokenizer_json: str) -> str:
    """Hash of what decides Unicode handling: normalizer, pre-tokenizer and model (vocab,
    merges). Added tokens are left out, so adding tokens does not force a re-derivation.

    Parsing a 248k-token vocabulary takes seconds, so only the small sections are parsed; the
    model section, which HF's serializer writes last, is hashed as text (~30 ms in all).
    """
    sections = top_level_sections(tokenizer_json)
    digest = hashlib.sha256()
    for part in ("normalizer", "pre_tokenizer"):
        digest.update(json.dumps(sections.get(part), sort_keys=True, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\0")
    model = sections.get("model")
    if not isinstance(model, str):  # a file laid out otherwise: its model as HF would write it
        model = json.dumps(model, separators=(",", ":"), ensure_ascii=False)
    digest.update(model.encode("utf-8"))
    return digest.hexdigest()


def _result_digest(record: dict) -> str:
    """What a derivation found (and how), independent of when and on which versions."""
    found = {key: record[key] for key in ("backend", "model_fingerprint", "contexts", "code_points", "found_by")}
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode("utf-8")).hexdigest()[:8]


def _prefix(backend_name: str, fingerprint: str) -> str:
    return f"{backend_name}-{fingerprint[:16]}-"


def search_path(cache_dir: Path) -> list[Path]:
    """Directories searched for records, first match wins."""
    baked = os.environ.get(BAKED_RECORDS_ENV)
    return [*([Path(baked)] if baked else []), SHIPPED_RECORDS, cache_dir / "guards"]


def find_record(
    backend_name: str, fingerprint: str, cache_dir: Path, versions: dict[str, str]
) -> tuple[dict | None, dict | None]:
    """(a record valid for `versions`, or None; any record found, for saying why it is stale)."""
    stale = None
    for directory in search_path(cache_dir):
        for path in sorted(directory.glob(_prefix(backend_name, fingerprint) + "*.json")):
            record = json.loads(path.read_text(encoding="utf-8"))
            if record.get("format") == RECORD_FORMAT and versions in record.get("applies_to", []):
                record["path"] = str(path)
                return record, record
            stale = stale or record
    return None, stale


def write_record(record: dict, directory: Path) -> Path:
    """Write atomically (readers in other processes never see half a file). A record that
    found exactly what one already in `directory` found is merged into it: the versions it
    was derived on are added to that record's `applies_to`."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {key: value for key, value in record.items() if key != "path"}
    path = directory / f"{_prefix(record['backend'], record['model_fingerprint'])}{_result_digest(record)}.json"
    if path.is_file():
        existing = json.loads(path.read_text(encoding="utf-8"))
        merged = existing.get("applies_to", []) + [
            versions for versions in record["applies_to"] if versions not in existing.get("applies_to", [])
        ]
        record = {**existing, "applies_to": merged}
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record, indent=1), encoding="utf-8")
    temporary.replace(path)
    return path


@contextlib.contextmanager
def derivation_lock(cache_dir: Path, backend_name: str, fingerprint: str) -> Iterator[None]:
    """Held while one process derives a record; the others block here, then find it."""
    directory = cache_dir / "guards"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, each process derives on its own
        yield
        return
    with open(directory / f".{_prefix(backend_name, fingerprint)}lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
