"""A store that passes everything through to another and keeps a copy of what was saved."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from typing import Any

from kernelpick.store.base import CandidateResult, ResultStore, load_candidates, parse_stored
from kernelpick.store.base import picked as stored_pick
from kernelpick.store.claims import Claims, claims_of
from kernelpick.store.keys import TuningKey


class RecordingStore:
    """Loads and saves through `store()`; `saved` holds what was saved as plain data (JSON-able), one
    entry per key: a tuning saves each result as it is measured, then all of them with the pick."""

    def __init__(self, store: Callable[[], ResultStore]) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._saved: dict[str, dict[str, Any]] = {}  # by key digest, in the order first saved
        self._kernels: dict[str, None] = {}  # in order, each once
        self._keys: dict[str, None] = {}  # the digests of the keys looked up or saved, in order, each once

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        self._kernels.setdefault(key.kernel)
        self._keys.setdefault(key.digest)
        return self._store().load(key)

    def load_candidates(self, key: TuningKey, candidates: Collection[str]) -> dict[str, CandidateResult]:
        self._kernels.setdefault(key.kernel)
        self._keys.setdefault(key.digest)
        return load_candidates(self._store(), key, candidates)

    def picked(self, key: TuningKey) -> str | bool | None:
        return stored_pick(self._store(), key)

    def claims(self) -> Claims | None:
        return claims_of(self._store())

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        results = list(results)
        self._kernels.setdefault(key.kernel)
        self._keys.setdefault(key.digest)
        self._store().save(key, results, pick=pick)
        with self._lock:
            entry = self._saved.setdefault(key.digest, {"key": key.to_dict(), "results": {}, "pick": None})
            for r in results:  # a later save of a candidate replaces its earlier one
                entry["results"][r.digest] = {
                    "candidate": r.digest,
                    "description": dict(r.description),
                    "result": r.result.to_dict(),
                }
            if pick is not None:
                entry["pick"] = pick

    @property
    def saved(self) -> list[dict[str, Any]]:
        """Each key saved for: its key, its results and its pick (None: none was saved), as plain data."""
        with self._lock:
            return [{**entry, "results": list(entry["results"].values())} for entry in self._saved.values()]

    @property
    def kernels(self) -> list[str]:
        """The kernels and selectors looked up or saved for, in order, each once."""
        return list(self._kernels)

    @property
    def keys(self) -> list[str]:
        """The digests of the tuning keys looked up or saved, in order, each once."""
        return list(self._keys)


def replay(saved: Iterable[dict[str, Any]], store: ResultStore) -> int:
    """Save recorded saves (`RecordingStore.saved`, e.g. from another process or machine) into `store`,
    each result checked as a store's row is (`kernelpick.store.base.parse_stored`); returns how many
    results.

    Raises:
        ValueError, KeyError, TypeError: an entry is not what `RecordingStore` records.
    """
    count = 0
    for entry in saved:
        results = [parse_stored(str(r["candidate"]), r["description"], r["result"]) for r in entry["results"]]
        pick = entry["pick"]
        store.save(TuningKey.from_dict(entry["key"]), results, pick=None if pick is None else str(pick))
        count += len(results)
    return count
