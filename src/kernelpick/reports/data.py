"""What a report shows, read from the tuning log and the result store: per tuned key, its candidates."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpick.bench.result import BenchmarkResult
from kernelpick.engine.record import LOG_VERSION, selection_key
from kernelpick.errors import ReportError
from kernelpick.reports.roofline import Roofline, roofline
from kernelpick.reports.search import LoggedSearch, finite_number, parse_search
from kernelpick.store.keys import canonical_json
from kernelpick.store.text import candidate_name, key_text
from kernelpick.work import gemm_name, work_of

if TYPE_CHECKING:
    from kernelpick.store.base import StoredRow

logger = logging.getLogger("kernelpick.reports")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One config or choice of a tuned key, with how it did."""

    name: str
    description: Mapping[str, Any]
    result: BenchmarkResult

    @property
    def params(self) -> dict[str, Any]:
        """Its parameters by name, scalars only: meta-parameters and compile options, and for a
        selector's choice what kind of choice it is (`kind`)."""
        found: dict[str, Any] = {}
        if "kind" in self.description:
            kind = (
                self.description.get("template") or self.description.get("kernel") or self.description["kind"]
            )
            found["kind"] = str(kind)
        config = self.description.get("config", self.description)
        if isinstance(config, Mapping):
            kwargs = config.get("kwargs")
            options = (
                {k: v for k, v in config.items() if k != "kwargs"} if isinstance(kwargs, Mapping) else {}
            )
            for name, value in [*(kwargs.items() if isinstance(kwargs, Mapping) else ()), *options.items()]:
                if isinstance(value, (bool, int, float, str)):
                    found[str(name)] = value
        return found

    def to_dict(self) -> dict[str, Any]:
        timing = self.result.timing
        return {
            "name": self.name,
            "description": dict(self.description),
            "params": self.params,
            "status": self.result.status,
            "cost_ms": self.result.cost_ms if self.result.ok else None,
            "median_ms": None if timing is None else timing.median_ms,
            "runs": None if timing is None else timing.runs,
            "timer": None if timing is None else timing.timer,
            "message": self.result.message,
            "from_store": self.result.from_store,
        }


@dataclass(frozen=True, slots=True)
class TunedKey:
    """Everything known of one kernel or selector tuned for one key on one device model.

    From the log, several tunings of the key (several search runs, say) are merged: each candidate's
    latest result, the latest winner, and every search trace.
    """

    kind: str  # "autotune" or "select"
    name: str
    key: Mapping[str, Any]  # as work functions see it (`kernelpick.work`)
    key_text: str
    key_inputs: Any  # the store key's inputs: what matches a log line with store rows
    device: str
    capability: str | None
    toolchain: Mapping[str, Any] | None
    candidates: tuple[Candidate, ...]
    best: str | None
    seconds: float | None  # the latest tuning's wall time (None from the store)
    time: float | None  # unix time of the latest tuning or stored result
    tunings: int  # log lines merged (0 from the store)
    source: str  # "log" or "store"
    note: str = ""
    searches: tuple[LoggedSearch, ...] = ()
    flops: float | None = None
    bytes: float | None = None

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """Kernel, device, inputs and toolchain: equal for a log line and the store rows of one tuning."""
        return self.name, self.device, canonical_json(self.key_inputs), canonical_json(self.toolchain)

    @property
    def slug(self) -> str:
        """A short name for files: the kernel's name and a hash of the key."""
        import hashlib

        return f"{safe_filename(self.name)}-{hashlib.sha256(repr(self.identity).encode()).hexdigest()[:8]}"

    def ranked(self) -> list[Candidate]:
        """Candidates that worked, fastest first, then the failures by status."""
        return sorted(
            self.candidates, key=lambda c: (not c.result.ok, c.result.cost_ms, c.result.status, c.name)
        )

    @property
    def winner(self) -> Candidate | None:
        by_name = {c.name: c for c in self.candidates}
        if self.best in by_name:
            return by_name[self.best]
        working = [c for c in self.ranked() if c.result.ok]
        return working[0] if working else None

    @property
    def best_known_ms(self) -> float | None:
        costs = [c.result.cost_ms for c in self.candidates if c.result.ok]
        return min(costs) if costs else None

    @property
    def dtype(self) -> str | None:
        """The dtype the call computes in: its first tensor's (or first key dtype)."""
        if self.kind == "select":
            for value in self.key.get("inputs", []):
                if isinstance(value, Mapping) and "dtype" in value:
                    return str(value["dtype"])
            return None
        dtypes = self.key.get("dtypes") or []
        return str(dtypes[0]) if dtypes else None

    def roofline(self, candidate: Candidate | None = None) -> Roofline | None:
        """Roofline figures of `candidate` (default: the winner), when FLOPs or bytes are known: from its
        device time (the median), not the host time a launch-bound call may cost."""
        chosen = candidate or self.winner
        if chosen is None or not chosen.result.ok:
            return None
        tf32 = self.name.endswith("_tf32") and gemm_name(self.name) is not None
        return roofline(self.flops, self.bytes, chosen.result.median_ms, self.device, self.dtype, tf32=tf32)

    def to_dict(self) -> dict[str, Any]:
        found = self.roofline()
        return {
            "kind": self.kind,
            "name": self.name,
            "key": dict(self.key),
            "key_text": self.key_text,
            "device": self.device,
            "capability": self.capability,
            "toolchain": None if self.toolchain is None else dict(self.toolchain),
            "source": self.source,
            "tunings": self.tunings,
            "seconds": self.seconds,
            "time": self.time,
            "best": self.best,
            "note": self.note,
            "flops": self.flops,
            "bytes": self.bytes,
            "roofline": None if found is None else found.to_dict(),
            "candidates": [c.to_dict() for c in self.ranked()],
            "searches": [s.to_dict() for s in self.searches],
        }


@dataclass(frozen=True, slots=True)
class Report:
    """The tuned keys a report shows, and where they were read."""

    keys: tuple[TunedKey, ...]
    sources: tuple[str, ...]

    def kernels(self) -> list[str]:
        return sorted({k.name for k in self.keys})

    def of(self, kernel: str) -> list[TunedKey]:
        return [k for k in self.keys if k.name == kernel]

    def to_dict(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "keys": [k.to_dict() for k in self.keys]}


def safe_filename(name: str) -> str:
    """`name` fit for a file name on any system: letters, digits, `-`, `_` and `.`, the rest `_`."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def load_report(log: Path | None = None, store: Path | None = None, kernel: str | None = None) -> Report:
    """The tuned keys of the tuning log at `log` and the result store at `store` (either may be None).

    A key in both is taken from the log, which also has search traces and work figures.

    Args:
        log: a tuning log (`KERNELPICK_LOG`).
        store: a SQLite result store (`results.sqlite3`).
        kernel: only this kernel's or selector's keys.

    Raises:
        ReportError: neither given, a file missing, or `kernel` found in neither (the message lists
            the names that were found).
    """
    if log is None and store is None:
        raise ReportError("nothing to report on: give a tuning log, a result store or both")
    logged = keys_from_log(read_log(log)) if log is not None else []
    seen = {k.identity for k in logged}
    stored = (
        [k for k in keys_from_store(_store_rows(store)) if k.identity not in seen]
        if store is not None
        else []
    )
    found = sorted([*logged, *stored], key=lambda k: (k.name, k.time or 0.0))
    sources = tuple(f"{what} {path}" for what, path in (("tuning log", log), ("result store", store)) if path)
    if kernel is not None:
        mine = [k for k in found if k.name == kernel]
        if not mine:
            names = sorted({k.name for k in found})
            raise ReportError(
                f"nothing tuned as {kernel!r} in the {' or the '.join(sources)}; "
                f"{'tuned there: ' + ', '.join(names) if names else 'nothing is tuned there yet'}"
            )
        found = mine
    return Report(tuple(found), sources)


def read_log(path: Path) -> list[dict[str, Any]]:
    """Every line of the tuning log at `path`, oldest first.

    A line that is not a JSON object of a known version (a line cut short by a crash, or text
    written by something else) is left out, with one warning saying how many were.

    Raises:
        ReportError: no file at `path`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ReportError(
            f"no tuning log at {path}: set KERNELPICK_LOG=<path> while tuning to write one, or pass "
            "the path of an existing log"
        ) from None
    entries, skipped = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if (
            isinstance(entry, dict)
            and entry.get("version") == LOG_VERSION
            and isinstance(entry.get("candidates"), list)
        ):
            entries.append(entry)
        else:
            skipped += 1
    if skipped:
        logger.warning("%s: %d lines that are not kernelpick tuning log lines were left out", path, skipped)
    return entries


def keys_from_log(entries: Iterable[Mapping[str, Any]]) -> list[TunedKey]:
    """One `TunedKey` per kernel, key, device and toolchain of the log lines, merging repeated tunings."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for entry in entries:
        identity = (
            str(entry.get("name")),
            str(entry.get("device")),
            canonical_json(entry.get("key_inputs")),
            canonical_json(entry.get("toolchain")),
        )
        groups.setdefault(identity, []).append(entry)
    return [_merge(sorted(group, key=lambda e: float(e.get("time") or 0.0))) for group in groups.values()]


def _merge(entries: Sequence[Mapping[str, Any]]) -> TunedKey:
    latest = entries[-1]
    candidates: dict[str, Candidate] = {}
    logged_as: dict[str, str] = {}  # a config's name in a line of an older kernelpick -> its name now
    for entry in entries:
        for data in entry["candidates"]:
            candidate = _logged_candidate(data)
            if candidate is not None:
                logged_as[data["name"]] = candidate.name
                candidates.pop(candidate.name, None)  # the latest result, in the latest order
                candidates[candidate.name] = candidate
    searches = [parse_search(data) for e in entries for data in _logged_searches(e)]
    key: Mapping[str, Any] = latest["key"] if isinstance(latest.get("key"), Mapping) else {}
    flops, moved = finite_number(latest.get("flops")), finite_number(latest.get("bytes"))
    if flops is None and moved is None:  # registered in this process, or built in
        flops, moved = work_of(str(latest.get("name")), key)
    return TunedKey(
        kind=str(latest.get("kind", "autotune")),
        name=str(latest.get("name")),
        key=key,
        key_text=str(latest.get("key_text", "")),
        key_inputs=latest.get("key_inputs"),
        device=str(latest.get("device")),
        capability=latest.get("capability"),
        toolchain=latest.get("toolchain"),
        candidates=tuple(candidates.values()),
        best=None if latest.get("best") is None else logged_as.get(str(latest["best"]), str(latest["best"])),
        seconds=finite_number(latest.get("seconds")),
        time=finite_number(latest.get("time")),
        tunings=len(entries),
        source="log",
        note=str(latest.get("note") or ""),
        searches=tuple(s for s in searches if s is not None),
        flops=flops,
        bytes=moved,
    )


def _logged_searches(entry: Mapping[str, Any]) -> list[Any]:
    """A log line's searches: a tuned kernel's `search`, a selector's `searches` (one per config
    space, each named after its strategy and space)."""
    found = [entry["search"]] if "search" in entry else []
    spaces = entry.get("searches")
    if isinstance(spaces, Mapping):
        found += [
            {**data, "strategy": f"{data.get('strategy') or 'search'} of {space}"}
            for space, data in spaces.items()
            if isinstance(data, Mapping)
        ]
    return found


def _logged_candidate(data: Any) -> Candidate | None:
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        return None
    try:
        result = BenchmarkResult.from_dict(data, from_store=bool(data.get("from_store")))
    except (KeyError, TypeError, ValueError):
        return None
    found = data.get("description")
    description: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    # A config by the name it has everywhere now (an older kernelpick logged Config's own text).
    name = candidate_name(description) if "kwargs" in description else data["name"]
    return Candidate(name, description, result)


def _store_rows(path: Path) -> list[StoredRow]:
    from kernelpick.store.maintenance import readable_rows
    from kernelpick.store.sqlite import SQLiteStore

    if not Path(path).is_file():
        raise ReportError(
            f"no result store at {path}: nothing was tuned with it yet; pass the path of results.sqlite3 "
            "(under KERNELPICK_CACHE_DIR)"
        )
    store = SQLiteStore(Path(path))
    try:
        rows, _ = readable_rows(store)  # `kernelpick cache verify` names the corrupt ones
    finally:
        store.close()
    return rows


def keys_from_store(rows: Iterable[StoredRow]) -> list[TunedKey]:
    """One `TunedKey` per store key: its candidates, and the pick of the tuning that stored them."""
    groups: dict[str, list[StoredRow]] = {}
    for row in rows:
        groups.setdefault(row.key.digest, []).append(row)
    found = []
    for group in groups.values():
        key = group[0].key
        selection = key.source.startswith("select-")
        inputs = list(key.inputs)
        picked = [r for r in group if r.picked]
        found.append(
            TunedKey(
                kind="select" if selection else "autotune",
                name=key.kernel,
                key=selection_key(inputs) if selection else {"values": inputs},
                key_text=key_text(key, compact=False),
                key_inputs=json.loads(canonical_json(inputs)),
                device=key.device,
                capability=key.capability or None,
                toolchain=asdict(key.toolchain),
                candidates=tuple(
                    Candidate(candidate_name(r.description), r.description, r.result) for r in group
                ),
                best=candidate_name(picked[0].description) if picked else None,
                seconds=None,
                time=max(r.created for r in group),
                tunings=0,
                source="store",
                flops=None,
                bytes=None,
            )
        )
    return [_with_work(k) for k in found]


def _with_work(tuned: TunedKey) -> TunedKey:
    if tuned.kind != "select":  # a tuned kernel's store key does not name its values
        return tuned
    flops, moved = work_of(tuned.name, tuned.key)
    return replace(tuned, flops=flops, bytes=moved)
