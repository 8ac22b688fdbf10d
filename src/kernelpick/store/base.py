"""The `ResultStore` interface: remembers one benchmark result per (tuning key, candidate)."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, Protocol, TypeGuard

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.store.keys import MAX_NESTING, TuningKey, nesting


@dataclass(frozen=True, slots=True)
class CandidateResult:
    """How one candidate did: its digest, its description (plain data: a config's kwargs and options, a
    choice's name), its benchmark result and, in a tuning's record, a name for people (a stored result
    has none)."""

    digest: str
    description: Mapping[str, Any]
    result: BenchmarkResult
    name: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "digest": self.digest,
            "choice": dict(self.description),
            **self.result.to_dict(),
        }


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

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        """Every result stored under `key`, by candidate digest."""
        ...

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        """Remember `results` under `key`, replacing earlier results of the same candidates.

        `pick` is the digest of the candidate the tuning chose (it may be one stored earlier): what a
        deployment table exported from the store runs for this key. A tuning saves each result as it
        is measured with no pick, and all of them with the pick once it has picked: a key with
        results and no pick is one whose tuning was interrupted (or whose candidates all failed).
        """
        ...


def load_candidates(
    store: ResultStore, key: TuningKey, candidates: Collection[str]
) -> dict[str, CandidateResult]:
    """The results `store` holds under `key` of the caller's own `candidates` only: a candidate another
    writer of a shared store added is never returned, nor copied into a local store (kernelpick's
    stores that copy have a `load_candidates(key, candidates)` method; the protocol asks none)."""
    load = getattr(store, "load_candidates", None)
    found: dict[str, CandidateResult] = load(key, candidates) if load is not None else store.load(key)
    return {candidate: stored for candidate, stored in found.items() if candidate in candidates}


def picked(store: ResultStore, key: TuningKey) -> str | bool | None:
    """The candidate the last finished tuning of `key` picked, None when there is none, or False when
    `store` cannot say (kernelpick's stores can, by a `picked(key)` method; the protocol asks none)."""
    ask = getattr(store, "picked", None)
    return False if ask is None else ask(key)


class UnreadStore:
    """Saves to `store` and reads nothing from it: a tuning through it measures every candidate, and
    its results replace what `store` held (a key whose stored pick failed to run)."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        return {}

    def picked(self, key: TuningKey) -> str | None:
        return None

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        self.store.save(key, results, pick=pick)


class MemoryStore:
    """A store that forgets when the process ends (used when the persistent store is off)."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, CandidateResult]] = {}
        self.picks: dict[str, str] = {}  # key digest -> the picked candidate's digest

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        # What comes back was read from a store, as from any other (so the stored pick can stand as the reference).
        return {
            candidate: replace(row, result=replace(row.result, from_store=True))
            for candidate, row in self._rows.get(key.digest, {}).items()
        }

    def picked(self, key: TuningKey) -> str | None:
        return self.picks.get(key.digest)

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        self._rows.setdefault(key.digest, {}).update({r.digest: r for r in results})
        if pick is not None:
            self.picks[key.digest] = pick


def parse_stored(candidate: str, description: Any, result: Any) -> CandidateResult:
    """A stored result read back from plain data (its description and result as JSON gave them), checked
    field by field: what a store holds that kernelpick did not write never reaches a pick's comparisons.

    Raises:
        ValueError: it is not what kernelpick stores; the message says what is wrong, in one line.
    """
    return CandidateResult(candidate, parse_description(description), parse_result(result))


def parse_description(data: Any) -> dict[str, Any]:
    """A stored candidate's description read back: a JSON object, nested no deeper than `MAX_NESTING`.

    Raises:
        ValueError: it is not one.
    """
    if not isinstance(data, dict):
        raise ValueError(f"description is {type(data).__name__}, not a JSON object")
    if nesting(data) > MAX_NESTING:
        raise ValueError(f"description is nested over {MAX_NESTING} deep")
    return data


def parse_result(data: Any) -> BenchmarkResult:
    """A stored `BenchmarkResult.to_dict()` read back and checked as kernelpick writes one: each timing
    figure of its type (the dataclasses check no types: a median of "fast" would otherwise be compared
    with numbers) and in its range (finite, positive where a time is, the median between the fastest
    and the slowest run), a status kernelpick stores, timings exactly when the status is `ok`, a
    message only when it is not.

    Raises:
        ValueError: it is not a result kernelpick writes; the message names the first field that is wrong.
    """
    if not isinstance(data, dict):
        raise ValueError(f"result is {type(data).__name__}, not a JSON object")
    timing = data.get("timing")
    if timing is not None:
        if not isinstance(timing, dict):
            raise ValueError(f"result's timing is {type(timing).__name__}, not a JSON object")
        for field in fields(TimingSummary):
            if field.name not in timing and field.default is MISSING:
                raise ValueError(f"result's timing has no {field.name}")
            value = timing.get(field.name, field.default)
            expected = _timing_type(field.name, value)
            if expected is not None:
                raise ValueError(f"result's timing.{field.name} is {str(value)[:64]!r}, not {expected}")
        _check_timing_ranges(timing)
    message = data.get("message", "")
    if not isinstance(message, str):
        raise ValueError("result's message is not text")
    compile_s = data.get("compile_s")
    if compile_s is not None and not (is_number(compile_s) and 0 <= compile_s < math.inf):
        raise ValueError(f"result's compile_s is {str(compile_s)[:64]!r}, not a number of seconds")
    if data.get("status") == "skipped":
        raise ValueError("result's status is 'skipped', which is never stored")
    if data.get("status") == "ok" and message:
        raise ValueError(f"result's status is 'ok' with a failure's message {message[:64]!r}")
    try:
        return BenchmarkResult.from_dict(data, from_store=True)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"result is not a benchmark result ({type(error).__name__}: {error})") from None


def _check_timing_ranges(timing: Mapping[str, Any]) -> None:
    """Raises ValueError where a stored timing's figures (of the right types) are out of their range."""
    for name in ("median_ms", "mean_ms", "min_ms", "max_ms", "iqr_ms"):
        if not 0 <= timing[name] < math.inf:
            raise ValueError(f"result's timing.{name} is {timing[name]!r}, not a finite time >= 0")
    if timing["median_ms"] <= 0:
        raise ValueError(f"result's timing.median_ms is {timing['median_ms']!r}, not a time > 0")
    # A relative slack: averaged figures (several GPUs' medians) may stray by a rounding.
    low, high = timing["min_ms"] * (1 - 1e-9), timing["max_ms"] * (1 + 1e-9)
    if not low <= timing["median_ms"] <= high:
        raise ValueError(
            f"result's timing.median_ms {timing['median_ms']!r} is not between its min_ms "
            f"{timing['min_ms']!r} and max_ms {timing['max_ms']!r}"
        )
    if timing["runs"] < 1 or not 0 <= timing["outliers"] <= timing["runs"]:
        raise ValueError(
            f"result's timing has {timing['runs']!r} runs and {timing['outliers']!r} outliers dropped"
        )
    host_ms = timing.get("host_ms")
    if host_ms is not None and not 0 < host_ms < math.inf:
        raise ValueError(f"result's timing.host_ms is {host_ms!r}, not a finite time > 0")


def is_number(value: Any, *, integer: bool = False) -> TypeGuard[float]:
    """Whether stored `value` is a number (an integer with `integer`): not a bool, not NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) if integer else not math.isnan(value)


def _timing_type(name: str, value: Any) -> str | None:
    """What `value` should be to stand in `TimingSummary.<name>`, or None when it may."""
    if name == "timer":
        return None if isinstance(value, str) else "text"
    if name == "host_ms" and value is None:
        return None
    integer = name in ("runs", "outliers")
    return None if is_number(value, integer=integer) else "an integer" if integer else "a number"
