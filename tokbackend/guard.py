"""Unicode divergence guard: text containing code points on which the backend and HuggingFace
disagree goes to HuggingFace.

HF tokenizers and gigatoken (ICU4X) carry different Unicode versions: some recently assigned
combining marks and letters get other classes in the split regex or other canonical combining
classes in NFC. Which code points diverge is not typed in by hand: it is derived by the
exhaustive code-point scan (`equivalence.codepoints`) of the backend against HuggingFace, and
recorded with the library versions it was derived on. A record whose versions differ from the
installed ones is re-derived (or, with `unicode_guard="refuse"`, the fast path is turned off).
Records for the built-in models ship in `tokbackend/guards/`; others are written to the cache.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import logging
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokbackend.backends import EncodeBackend

logger = logging.getLogger("tokbackend")

SHIPPED_GUARDS = Path(__file__).parent / "guards"
RECORD_FORMAT = 1


class GuardUnavailableError(RuntimeError):
    """No guard record matches the installed versions and deriving one is not allowed."""


class UnicodeGuard:
    """Answers, cheaply, whether a text contains any of the divergent code points.

    ASCII text costs a flag test; other text one UTF-32 view, a max and a table lookup
    (~150-200 us per 100k characters), and nothing more when no character reaches the
    smallest divergent code point.
    """

    def __init__(self, code_points: frozenset[int]) -> None:
        self.code_points = code_points
        self._smallest = min(code_points) if code_points else 0x110000
        self._table = _lookup_table(code_points)

    def needs_hf(self, text: str) -> bool:
        if not self.code_points or text.isascii():
            return False
        units = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        if int(units.max()) < self._smallest:
            return False
        return bool(np.take(self._table, units, mode="clip").any())


@functools.lru_cache(maxsize=8)
def _lookup_table(code_points: frozenset[int]) -> np.ndarray:
    table = np.zeros(0x110000, dtype=np.bool_)
    if code_points:
        table[np.fromiter(code_points, dtype=np.int64)] = True
    return table


def installed_versions(backend_name: str) -> dict[str, str]:
    """The library versions a guard record is valid for."""
    versions = {"tokenizers": version("tokenizers")}
    if backend_name == "gigatoken":
        versions["gigatoken"] = version("gigatoken")
    return versions


def model_fingerprint(hf_tokenizer) -> str:
    """Hash of what decides Unicode handling: normalizer, pre-tokenizer and model (vocab,
    merges). Added tokens are left out, so adding tokens does not force a re-derivation."""
    rust = hf_tokenizer.backend_tokenizer
    digest = hashlib.sha256()
    for component in (rust.normalizer, rust.pre_tokenizer, rust.model):
        digest.update(b"\0" if component is None else component.__getstate__())
    return digest.hexdigest()


def _record_name(backend_name: str, fingerprint: str) -> str:
    return f"{backend_name}-{fingerprint[:16]}.json"


def _code_points_from_ranges(ranges: list[list[int]]) -> frozenset[int]:
    return frozenset(code_point for first, last in ranges for code_point in range(first, last + 1))


def find_record(
    backend_name: str, fingerprint: str, cache_dir: Path, versions: dict[str, str]
) -> tuple[dict | None, dict | None]:
    """(a record valid for `versions`, or None; any record found, for saying why it is stale).
    Shipped records are looked at first, then the cache."""
    found = None
    for directory in (SHIPPED_GUARDS, cache_dir / "guards"):
        path = directory / _record_name(backend_name, fingerprint)
        if path.is_file():
            record = json.loads(path.read_text(encoding="utf-8"))
            if record.get("format") == RECORD_FORMAT and record.get("versions") == versions:
                return record, record
            found = found or record
    return None, found


def derive_record(hf_tokenizer, backend: EncodeBackend, backend_name: str, fingerprint: str) -> dict:
    """Run the exhaustive code-point scan (backend vs HF) and return a guard record."""
    from equivalence.codepoints import CONTEXTS, ranges, scan
    from tokbackend.backends.hf import HFBackend

    report = scan(HFBackend(hf_tokenizer).encode_batch, {"backend": backend.encode_batch})["backend"]
    return {
        "format": RECORD_FORMAT,
        "backend": backend_name,
        "model_fingerprint": fingerprint,
        "versions": installed_versions(backend_name),
        "derived_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "scan_seconds": round(report.seconds, 1),
        "contexts": list(CONTEXTS),
        "code_points": [list(pair) for pair in ranges(report.all_divergent)],
    }


def write_record(record: dict, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _record_name(record["backend"], record["model_fingerprint"])
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=1), encoding="utf-8")
    temporary.replace(path)
    return path


def load_guard(hf_tokenizer, backend: EncodeBackend, backend_name: str, mode: str, cache_dir: Path) -> UnicodeGuard:
    """The guard for this model and backend under `mode` ("derive", "refuse" or "off")."""
    if mode == "off":
        return UnicodeGuard(frozenset())
    fingerprint = model_fingerprint(hf_tokenizer)
    current = installed_versions(backend_name)
    record, stale = find_record(backend_name, fingerprint, cache_dir, current)
    if record is not None:
        return UnicodeGuard(_code_points_from_ranges(record["code_points"]))
    why = "no guard record for this model" if stale is None else f"recorded for {stale.get('versions')}, installed {current}"
    if mode == "refuse":
        raise GuardUnavailableError(
            f"Unicode divergence guard for backend {backend_name!r}: {why}; run `tokbackend guard <model>` to derive it, "
            'or pass unicode_guard="derive"'
        )
    logger.warning("tokbackend: deriving the Unicode divergence guard (%s); a one-time scan of every code point", why)
    record = derive_record(hf_tokenizer, backend, backend_name, fingerprint)
    path = write_record(record, cache_dir / "guards")
    logger.warning(
        "tokbackend: guard derived in %.1f s: %d ranges, saved to %s", record["scan_seconds"], len(record["code_points"]), path
    )
    return UnicodeGuard(_code_points_from_ranges(record["code_points"]))
