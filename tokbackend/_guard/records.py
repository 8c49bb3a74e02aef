"""Guard records on disk: their keys, where they are looked up, and the lock that lets one process
per machine derive a missing one.

A record is keyed by the pipeline up to the model (scope "pipeline") where the vocabulary-free
oracle found all there was, otherwise also by the model with its added tokens (scope "model").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

from tokbackend._cache_dir import kept_in_cache, read_json_object, write_json_object
from tokbackend._package_data import package_path
from tokbackend._tokenizer_json import does_nothing, model_head, model_settings, top_level_sections

SHIPPED_RECORDS = package_path("tokbackend._guard", "shipped")
BAKED_RECORDS_ENV = "TOKBACKEND_GUARD_DIR"
# Bumped whenever the derivation changes what it finds, so older records are re-derived.
RECORD_FORMAT = 3
LEGACY_FORMAT = 2  # keyed by backend and model fingerprint; still read
# The model fields (before its vocabulary) that a pipeline record depends on.
_PIPELINE_MODEL_FIELDS = re.compile(r'"(type|dropout)":\s*("[^"]*"|[-0-9.eE]+|null|true|false)')
# ... and those that change the boundary oracle's ids where set (keyed only then).
_SUBWORD_AFFIXES = ("continuing_subword_prefix", "end_of_word_suffix")
GuardRecord = dict[str, Any]  # a record as its JSON file holds it


@functools.cache
def installed_version(library: str) -> str:
    """`library`'s installed version, read once per process (as it was imported)."""
    try:
        return version(library)
    except PackageNotFoundError:
        return "not installed"


def model_fingerprint(tokenizer_json: str) -> str:
    """Hash of normalizer, pre-tokenizer and model (vocab, merges), added tokens left out; the model
    section is hashed as text (parsing a large vocabulary takes seconds)."""
    sections = top_level_sections(tokenizer_json)
    digest = hashlib.sha256(_steps(sections, lambda node: node))
    model = sections.get("model")
    if not isinstance(model, str):  # a file laid out otherwise: its model as HF would write it
        model = json.dumps(model, separators=(",", ":"), ensure_ascii=False)
    digest.update(model.encode("utf-8"))
    return digest.hexdigest()


def vocabulary_fingerprint(tokenizer_json: str) -> str:
    """Hash of `model_fingerprint` and the added tokens: what the ids oracle depends on."""
    sections = top_level_sections(tokenizer_json)
    digest = hashlib.sha256(model_fingerprint(tokenizer_json).encode("ascii"))
    digest.update(json.dumps(sections.get("added_tokens"), sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def pipeline_fingerprint(tokenizer_json: str) -> str:
    """Hash of the pipeline up to the model (normalizer, pre-tokenizer, model type, dropout, affixes)."""
    sections = top_level_sections(tokenizer_json)
    digest = hashlib.sha256(_steps(sections, _canonical))
    head = model_head(sections).split('"vocab"', 1)[0]
    fields = _PIPELINE_MODEL_FIELDS.findall(head)
    settings = model_settings(sections)
    fields += [(name, json.dumps(settings[name])) for name in _SUBWORD_AFFIXES if settings.get(name)]
    digest.update(json.dumps(sorted(fields)).encode("utf-8"))
    return digest.hexdigest()


def _steps(sections: dict[str, Any], form: Callable[[object], object]) -> bytes:
    """The normalizer and the pre-tokenizer as the fingerprints hash them: `form` of each, as JSON."""
    parts = (
        json.dumps(form(sections.get(part)), sort_keys=True, ensure_ascii=False)
        for part in ("normalizer", "pre_tokenizer")
    )
    return b"".join(part.encode("utf-8") + b"\0" for part in parts)


# Fields that change offsets only, never ids: two files that differ in them share a record.
_OFFSETS_ONLY = frozenset({"trim_offsets"})


def _canonical(node: object) -> object:
    """A normalizer or pre-tokenizer without what cannot change ids (offset-only fields, no-ops)."""
    if isinstance(node, list):
        return [_canonical(item) for item in node]
    if not isinstance(node, dict):
        return node
    if does_nothing(node):
        return None
    return {key: _canonical(value) for key, value in node.items() if key not in _OFFSETS_ONLY}


def describe_pipeline(tokenizer_json: str) -> str:
    """'NFC + Sequence[Split(regex 3f1a9c..), ByteLevel]': the pipeline a record matched, for logs."""
    sections = top_level_sections(tokenizer_json)

    def name(node: dict[str, Any] | None) -> str:
        if node is None:
            return "none"
        kind: str = node.get("type", "?")
        children = node.get("normalizers") or node.get("pretokenizers")
        if children is not None:
            return f"{kind}[{', '.join(name(child) for child in children)}]"
        pattern = (node.get("pattern") or {}).get("Regex")
        if pattern is not None:
            return f"{kind}(regex {hashlib.sha256(pattern.encode('utf-8')).hexdigest()[:6]})"
        return kind

    return f"{name(sections.get('normalizer'))} + {name(sections.get('pre_tokenizer'))}"


@dataclasses.dataclass(frozen=True)
class RecordKey:
    """What a guard record is looked up by (see the module docstring)."""

    family: str  # the backend's guard family
    pipeline: str
    tokenizer_json: str = dataclasses.field(repr=False, compare=False)

    @functools.cached_property
    def model(self) -> str:
        """The model fingerprint, read only when a model-scope or earlier-format record is looked for."""
        return model_fingerprint(self.tokenizer_json)

    @functools.cached_property
    def vocabulary(self) -> str:
        """The vocabulary fingerprint (the model with its added tokens), read as `model` is."""
        return vocabulary_fingerprint(self.tokenizer_json)


def record_key(tokenizer_json: str, family: str) -> RecordKey:
    """The key of `tokenizer_json`'s record for the backend guard family `family`."""
    return RecordKey(family, pipeline_fingerprint(tokenizer_json), tokenizer_json)


def find_record(
    key: RecordKey, cache_dir: Path, versions: dict[str, str], shipped: Path = SHIPPED_RECORDS
) -> tuple[GuardRecord | None, GuardRecord | None]:
    """(a record valid for `versions` or None, any record found), searching $TOKBACKEND_GUARD_DIR,
    `shipped`, then the cache; a found record carries `path` and `matched`. A damaged record is
    passed over (a WARNING names it), and removed where it is in the cache."""
    stale = None
    baked = os.environ.get(BAKED_RECORDS_ENV)
    for directory in [*([Path(baked)] if baked else []), shipped, cache_dir / "guards"]:
        if not any(directory.glob(f"{key.family}-*.json")):
            continue  # the model's fingerprint (costly) is read only where records of the family are
        for matched in ("pipeline", "model", "model, earlier format"):
            # what a record `key` may match as `matched` holds, and so its name (`_name_prefix`)
            if matched == "pipeline":
                wanted = {"format": RECORD_FORMAT, "pipeline": key.pipeline}
            elif matched == "model":
                wanted = {"format": RECORD_FORMAT, "pipeline": key.pipeline, "scope": "model"}
                wanted |= {"model_fingerprint": key.model, "vocabulary_fingerprint": key.vocabulary}
            else:
                wanted = {"format": LEGACY_FORMAT, "model_fingerprint": key.model}
            names = _name_prefix({"backend": key.family, **wanted}) + ("[!m]*" if matched == "pipeline" else "*")
            for path in sorted(directory.glob(names + ".json")):
                record = read_json_object(path, "guard record")
                if record is None:
                    if directory == cache_dir / "guards":
                        with contextlib.suppress(OSError):
                            path.unlink()
                    continue
                applies = all(record.get(field) == value for field, value in wanted.items())
                applies = applies and (matched != "pipeline" or record.get("scope") != "model")
                if applies and versions in record.get("applies_to", []):
                    return {**record, "path": str(path), "matched": matched, "matched_versions": versions}, record
                stale = stale or record
    return None, stale


def write_record(record: GuardRecord, directory: Path) -> Path:
    """Write atomically; a record that found what one in `directory` found adds its versions to it."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {key: value for key, value in record.items() if key not in ("path", "matched", "matched_versions")}
    # named by what the derivation found (and how), independent of when and on which versions
    found = {
        key: record.get(key) for key in ("backend", "scope", "pipeline", "model_fingerprint", "vocabulary_fingerprint")
    }
    found |= {key: record.get(key) for key in ("contexts", "code_points", "found_by")}
    digest = hashlib.sha256(json.dumps(found, sort_keys=True).encode("utf-8")).hexdigest()[:8]
    path = directory / f"{_name_prefix(record)}{digest}.json"
    existing = read_json_object(path, "guard record")
    if existing is not None:  # its labels ("families", "models") kept
        known = existing.get("applies_to", [])
        record = {
            **existing,
            "applies_to": known + [versions for versions in record["applies_to"] if versions not in known],
        }
    write_json_object(path, record)
    return path


def _name_prefix(record: dict[str, Any]) -> str:
    """The start of the file name `write_record` gives `record`, and `find_record` looks for."""
    if record.get("format") == LEGACY_FORMAT:
        return f"{record['backend']}-{record['model_fingerprint'][:16]}-"
    prefix = f"{record['backend']}-p{record['pipeline'][:16]}-"
    if record.get("scope") == "model":
        prefix += f"m{record['model_fingerprint'][:12]}-v{record['vocabulary_fingerprint'][:12]}-"
    return prefix


@contextlib.contextmanager
def derivation_lock(cache_dir: Path, key: RecordKey) -> Iterator[None]:
    """Held while one process derives a record; the others block, then find it (no lock off POSIX)."""
    try:
        import fcntl
    except ImportError:
        yield
        return

    def lock_file() -> IO[str]:
        directory = cache_dir / "guards"
        directory.mkdir(parents=True, exist_ok=True)
        return open(directory / f".{key.family}-p{key.pipeline[:16]}.lock", "w")

    handle = kept_in_cache(cache_dir, lock_file)
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
