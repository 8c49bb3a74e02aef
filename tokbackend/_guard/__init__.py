"""The Unicode divergence guard: text holding a code point on which a backend and HuggingFace
disagree goes to HuggingFace.

Two oracles (`derive`) scan the code points in contexts drawn from the model's pipeline, and the
result is a record (`records`); a replica with no record derives one within a budget (`bound`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from tokbackend._cache_dir import kept_in_cache
from tokbackend._guard.records import (
    SHIPPED_RECORDS,
    derivation_lock,
    find_record,
    installed_version,
    model_fingerprint,
    record_key,
    write_record,
)
from tokbackend._guard.scan import DerivationBudget, GuardUnavailableError, from_ranges
from tokbackend._wording import counted

if TYPE_CHECKING:
    from tokbackend._guard.records import GuardRecord
    from tokbackend.backends._base import BackendClass, BatchEncoder

logger = logging.getLogger("tokbackend")


# What a derivation at accelerate() time may spend (docs/guard-records.md says what they take).
DERIVATION_BUDGET = DerivationBudget(seconds=10.0, megabytes=500)


@dataclasses.dataclass(frozen=True)
class GuardSettings:
    """Where `accelerate()` reads guard records from, and what a derivation there may scan
    (None: the plan in `derive`) and spend (`AccelerationOptions(guard=...)`)."""

    budget: DerivationBudget = DERIVATION_BUDGET
    code_points: tuple[int, ...] | None = None
    shipped_records: Path = SHIPPED_RECORDS


class UnicodeGuard:
    """Answers, cheaply, whether a text contains any of the divergent code points (a few as
    substrings, more by a table lookup of its UTF-32 view)."""

    FEW = 8

    def __init__(self, code_points: frozenset[int], record: GuardRecord | None = None) -> None:
        self.code_points = code_points
        self.record = record or {}
        self._smallest = min(code_points) if code_points else 0x110000
        self._few = (
            tuple(chr(code_point) for code_point in sorted(code_points)) if len(code_points) <= self.FEW else None
        )
        self._table = None if self._few is not None else _lookup_table(code_points)

    def needs_hf(self, text: str) -> bool:
        """Whether `text` holds a divergent code point, so that HuggingFace must answer it."""
        if not self.code_points or text.isascii():
            return False
        if self._few is not None:
            return any(character in text for character in self._few)
        units = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        units = units[units >= self._smallest]
        return bool(units.size) and bool(np.take(cast("np.ndarray", self._table), units, mode="clip").any())

    def guarded(self, texts: list[str]) -> set[int]:
        """The indexes of the texts HuggingFace must answer (`needs_hf`), asked of non-ASCII ones only."""
        if not self.code_points:
            return set()
        needs_hf = self.needs_hf
        return {index for index, text in enumerate(texts) if not text.isascii() and needs_hf(text)}

    def by_class(self) -> dict[str, dict[str, int]]:
        """{oracle: {family: code points}} from the record: which oracle found what."""
        return {
            oracle: {family: len(from_ranges(found)) for family, found in families.items()}
            for oracle, families in self.record.get("found_by", {}).items()
        }

    def describe(self) -> str:
        """'4859 code points (ids: contractions 4702, ...; boundaries: ...), record gigatoken-....json'."""
        parts = []
        for oracle, families in self.by_class().items():
            found = from_ranges(pair for family in self.record["found_by"][oracle].values() for pair in family)
            detail = ", ".join(f"{family} {count}" for family, count in families.items()) or "nothing"
            parts.append(f"oracle {oracle} {len(found)} ({detail})")
        return f"{counted(len(self.code_points), 'code point')}; " + "; ".join(parts) + f"; {self.source()}"

    def source(self) -> str:
        """Which record applies and why it matched, for the start-up line and verify."""
        if not self.record:
            return "no record"
        if "path" in self.record:
            path = Path(self.record["path"])
            name, where = path.name, "shipped" if path.parent == SHIPPED_RECORDS else str(path.parent)
        else:  # derived where the cache directory could not be written
            name, where = "no file", "kept in memory only"
        matched = self.record.get("matched", "?")
        what = self.record.get("pipeline_description", "")
        if self.record.get("families"):
            what = f"{self.record['families']} pipeline, {what}"
        versions: dict[str, str] = self.record.get("matched_versions") or next(
            iter(self.record.get("applies_to", [])), {}
        )
        installed = ", ".join(f"{library} {value}" for library, value in versions.items())
        return f"{name} ({where}; matched by {matched}{': ' + what if what else ''}; {installed})"


@functools.lru_cache(maxsize=8)
def _lookup_table(code_points: frozenset[int]) -> np.ndarray:
    table = np.zeros(0x110000, dtype=np.bool_)
    table[np.fromiter(code_points, dtype=np.int64)] = True
    return table


def guard_versions(backend_libraries: tuple[str, ...]) -> dict[str, str]:
    """The versions a record depends on: HF tokenizers' and the backend's own libraries."""
    return {library: installed_version(library) for library in ("tokenizers", *backend_libraries)}


def load_guard(
    tokenizer_json: str,
    kind: BackendClass,
    mode: str,
    cache_dir: Path,
    settings: GuardSettings,
    served: tuple[BatchEncoder, BatchEncoder] | None = None,
    refuses: Callable[[], str | None] | None = None,
) -> UnicodeGuard:
    """The guard for this tokenizer and backend class `kind` under `mode` ("derive", "refuse" or "off").

    `served`: the served pair's encode, for the screen (`derive_record`). Raises GuardUnavailableError
    where no guard can be had: "refuse" without a record, `refuses()` saying why, or a derivation
    refused or past `settings.budget` (then nothing is written).
    """
    if mode == "off":
        return UnicodeGuard(frozenset())
    family = kind.guard_family
    key = record_key(tokenizer_json, family)
    versions = guard_versions(tuple(kind.versioned_libraries))
    record, stale = find_record(key, cache_dir, versions, settings.shipped_records)
    if record is not None:
        return written_guard(record)
    why = "no guard record for this pipeline"
    if stale is not None:
        why = f"recorded for {stale.get('applies_to')}, installed {versions}"
    if mode == "refuse":
        raise GuardUnavailableError(
            f"Unicode divergence guard for backend {family!r}: {why}; run `tokbackend guard <model>` to derive it, "
            'or pass unicode_guard="derive"'
        )
    if refuses is not None and (refused := refuses()) is not None:
        raise GuardUnavailableError(f"Unicode divergence guard for backend {family!r} not derived: {refused}")
    from tokbackend._guard.derive import derive_record, scanning_instances

    with derivation_lock(cache_dir, key):
        record, _ = find_record(key, cache_dir, versions, settings.shipped_records)
        if record is not None:
            logger.info("using the guard record another process derived: %s", record["path"])
            return written_guard(record)
        logger.warning("deriving the Unicode divergence guard for backend %s (%s); a one-time scan", family, why)
        try:
            record = derive_record(
                key,
                scanning_instances(kind),
                versions,
                code_points=settings.code_points,
                budget=settings.budget,
                served=served,
                ascii_probed=refuses is not None,
            )
        except GuardUnavailableError as error:  # refused or past its budget: the caller serves without it
            logger.warning("%s", error)
            raise
        derived = {**record, "matched": "derived here"}
        # where the cache cannot be written, it serves from memory; the next process derives it again
        guard = kept_in_cache(cache_dir, lambda: written_guard(derived, cache_dir / "guards")) or written_guard(derived)
    logger.warning(
        "guard derived in %.1f s: %s, %s",
        record["scan_seconds"],
        counted(len(guard.code_points), "code point"),
        f"saved to {guard.record['path']}" if "path" in guard.record else "kept in memory only",
    )
    return guard


def written_guard(record: GuardRecord, directory: Path | None = None) -> UnicodeGuard:
    """The guard of a record found on disk, or of one just derived, written under `directory` first."""
    if directory is not None:
        record = {**record, "path": str(write_record(record, directory)), "matched": "derived here"}
    return UnicodeGuard(from_ranges(record["code_points"]), record)


__all__ = [
    "DERIVATION_BUDGET",
    "DerivationBudget",
    "GuardSettings",
    "GuardUnavailableError",
    "UnicodeGuard",
    "guard_versions",
    "load_guard",
    "model_fingerprint",
]
