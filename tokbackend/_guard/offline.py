"""Guard records derived ahead of time (`tokbackend guard`), to bake into an image: offline, so
unbounded; the fast derivation by default, the full scan of every code point with `full`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tokbackend._guard import GuardUnavailableError, UnicodeGuard, guard_versions, written_guard
from tokbackend._guard.derive import derive_record, scanning_instances
from tokbackend._guard.records import record_key
from tokbackend.backends import backend_class
from tokbackend.backends._base import BackendUnavailableError


@dataclasses.dataclass(frozen=True)
class Derived:
    """What deriving one backend's record gave: its guard, or why there is none (`problem`);
    neither where the backend needs no guard."""

    backend: str
    guard: UnicodeGuard | None = None
    problem: str | None = None  # "cannot serve this model (...)", "not exact for this model (...)"


def derive_records(
    tokenizer_json: str,
    backends: Iterable[str],
    directory: Path,
    full: bool = False,
    progress: Callable[[str, str], None] | None = None,
) -> Iterator[Derived]:
    """Derive, write under `directory` and yield one record per named backend (`Derived`).
    `progress(backend, step)` is told each step of a derivation.

    >>> for derived in derive_records(tokenizer_json, ["gigatoken"], Path("baked")):  # doctest: +SKIP
    ...     print(derived.backend, derived.problem or derived.guard.record["path"])
    """
    for name in backends:
        kind = backend_class(name)
        if not kind.needs_unicode_guard:
            yield Derived(name)
            continue
        try:
            record = derive_record(
                record_key(tokenizer_json, kind.guard_family),
                scanning_instances(kind),
                guard_versions(tuple(kind.versioned_libraries)),
                progress=None if progress is None else functools.partial(progress, name),
                full=full,
            )
        except BackendUnavailableError as error:
            yield Derived(name, problem=f"cannot serve this model ({error}); no record")
        except GuardUnavailableError as error:  # wrong on ASCII text: no guard can make it exact
            yield Derived(name, problem=f"not exact for this model ({error})")
        else:
            yield Derived(name, written_guard(record, directory))
