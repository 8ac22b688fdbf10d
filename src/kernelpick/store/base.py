"""The `ResultStore` interface: remembers one benchmark result per (tuning key, candidate)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kernelpick.bench.result import BenchmarkResult
from kernelpick.store.keys import TuningKey


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One remembered result: which candidate (as plain data) and how it did."""

    candidate: str  # the candidate's digest
    description: Mapping[
        str, Any
    ]  # plain data describing it (a config's kwargs and options, a choice's name)
    result: BenchmarkResult


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One stored result as tools see it (`kernelpick cache`, tables): its key as plain data too."""

    key: TuningKey
    candidate: str
    description: Mapping[str, Any]
    result: BenchmarkResult
    created: float  # unix time it was stored
    picked: bool  # whether the tuning that stored it ran this candidate


class ResultStore(Protocol):
    """Anything that remembers results. Stored data is plain data; nothing read back is executed."""

    def load(self, key: TuningKey) -> dict[str, StoredResult]:
        """Every result stored under `key`, by candidate digest."""
        ...

    def save(self, key: TuningKey, results: Iterable[StoredResult], *, pick: str | None = None) -> None:
        """Remember `results` under `key`, replacing earlier results of the same candidates.

        `pick` is the digest of the candidate the tuning chose (it may be one stored earlier): what a
        deployment table exported from the store runs for this key.
        """
        ...


class MemoryStore:
    """A store that forgets when the process ends (used when the persistent store is off)."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, StoredResult]] = {}
        self.picks: dict[str, str] = {}  # key digest -> the picked candidate's digest

    def load(self, key: TuningKey) -> dict[str, StoredResult]:
        # What comes back was read from a store, as from any other (the stored incumbent is told so).
        return {
            candidate: replace(row, result=replace(row.result, from_store=True))
            for candidate, row in self._rows.get(key.digest, {}).items()
        }

    def save(self, key: TuningKey, results: Iterable[StoredResult], *, pick: str | None = None) -> None:
        self._rows.setdefault(key.digest, {}).update({r.candidate: r for r in results})
        if pick is not None:
            self.picks[key.digest] = pick
