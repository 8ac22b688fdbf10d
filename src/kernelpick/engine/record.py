"""`TuningRecord`: what one tuning found, and its reports: the AUTOTUNE table and the tuning log."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.console import Column, FittingTable, headline, print_table, warn_once
from kernelpick.device import DeviceInfo
from kernelpick.engine.eligibility import SkippedChoice
from kernelpick.engine.signature import Signature
from kernelpick.files import append_line
from kernelpick.search.run import SearchTrace
from kernelpick.store.base import CandidateResult as CandidateResult
from kernelpick.store.keys import Toolchain, canonical_json, canonical_value
from kernelpick.store.text import candidate_name, notable_specialization
from kernelpick.work import work_of

log = logging.getLogger("kernelpick.reports")


@dataclass(frozen=True, slots=True)
class TuningRecord:
    """The outcome of one tuning: a tuned kernel's for one key (`kernel.last_tuning`), a selector's
    for one input signature (`selector.last_selection`).

    `results` maps each candidate as its front names it (a kernel's config as given, a choice by
    name) to its result; `best` is the one that runs, in the same terms, `winner` its row.
    `candidates` has every candidate's row: a kernel's in the order of its configs (none when pruning
    left one config), a selection's fastest first among those that worked. `from_store`: nothing had
    to be measured; `note`: why `best` is not the fastest, when the reference was kept; `reference`:
    what outputs were checked against (None: nothing); `skipped`: the choices the device cannot run,
    with the reason; `searches`: each searched space's trace by its name (`candidates` then holds only
    what was evaluated); `phases`: the seconds of its steps (table, store_read, analysis, compile,
    benchmark, store_write, wait, ...); `timed_here`: what was measured in this process although
    isolation was wanted, and why. `key_text` is the key for people ("(M=128, N=4096)"), after the
    name in `title`; `key_names` names a kernel's leading key values. `measured_as` says what ranked
    the candidates: "graph" (device time; always for a kernel's configs) or "eager" (the larger of
    device and host time per call). `provisional`: a pick that runs while tuned in the background.
    """

    kind: str  # "autotune" (a tuned kernel) or "select" (a selector)
    name: str
    key: tuple[Any, ...]
    key_text: str
    device: DeviceInfo
    candidates: tuple[CandidateResult, ...]
    best_digest: str
    seconds: float
    from_store: bool
    phases: Mapping[str, float] = field(default_factory=dict)
    note: str = ""
    searches: Mapping[str, SearchTrace] = field(default_factory=dict)
    timed_here: Mapping[str, str] = field(default_factory=dict)
    reference: str | None = None
    skipped: tuple[SkippedChoice, ...] = ()
    signature: Signature | None = None
    key_names: tuple[str, ...] = ()
    #: Each candidate as its front names it, by digest: a kernel's config as given (default: its name).
    given: Mapping[str, Any] = field(default_factory=dict)
    measured_as: str = "graph"
    provisional: bool = False
    _rows: dict[str, CandidateResult] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rows", {r.digest: r for r in self.candidates})

    @classmethod
    def of_configs(
        cls,
        kernel: str,
        key: tuple[Any, ...],
        device: DeviceInfo,
        results: Mapping[Config, BenchmarkResult],
        best: Config,
        seconds: float,
        from_store: bool,
        **fields: Any,
    ) -> TuningRecord:
        """The record of a tuned kernel whose configs had `results` (`fields`: the rest by name)."""
        rows = [
            CandidateResult(c.digest, c.to_data(), r, name=candidate_name(c.to_dict()))
            for c, r in results.items()
        ]
        given = {c.digest: c for c in (*results, best)}
        return cls("autotune", kernel, key, fields.pop("key_text", ""), device, tuple(rows), best.digest,
                   seconds, from_store, given=given, **fields)  # fmt: skip

    @classmethod
    def of_selection(
        cls,
        selector: str,
        key: tuple[Any, ...],
        signature: Signature,
        rows: Sequence[CandidateResult],
        best: str,
        seconds: float,
        from_store: bool,
        **fields: Any,
    ) -> TuningRecord:
        """The record of a selection for `signature` (`best`: the pick's digest; `fields`: the rest)."""
        return cls("select", selector, key, str(signature), signature.device, tuple(rows), best, seconds,
                   from_store, signature=signature, **fields)  # fmt: skip

    def _as_given(self, digest: str) -> Any:
        return self.given[digest] if digest in self.given else self._rows[digest].name

    @property
    def results(self) -> dict[Any, BenchmarkResult]:
        return {self._as_given(r.digest): r.result for r in self.candidates}

    @property
    def best(self) -> Any:
        return self._as_given(self.best_digest)

    @property
    def winner(self) -> CandidateResult:
        """The row of `best` (KeyError for a kernel's single config, which has none)."""
        return self._rows[self.best_digest]

    @property
    def best_name(self) -> str:
        """`best` as tables name it."""
        row = self._rows.get(self.best_digest)
        return row.name if row is not None else str(self.best)

    @property
    def failed(self) -> dict[Any, BenchmarkResult]:
        return {given: result for given, result in self.results.items() if not result.ok}

    def __getitem__(self, name: str) -> CandidateResult:
        """The row of the candidate named `name`."""
        for row in self.candidates:
            if row.name == name:
                return row
        raise KeyError(name)

    @property
    def kernel(self) -> str:
        """The tuned kernel's name (`name`)."""
        return self.name

    @property
    def selector(self) -> str:
        """The selector's name (`name`)."""
        return self.name

    @property
    def search(self) -> SearchTrace | None:
        """What a tuned kernel's search did (None: every config was timed)."""
        return self.searches.get(self.name) if self.kind == "autotune" else None

    @property
    def title(self) -> str:
        """Its AUTOTUNE table's title: the name the store knows (`kernelpick cache show`'s), and its key."""
        return f"{self.name}{self.key_text}"

    def table(self) -> FittingTable:
        """The AUTOTUNE table: candidate, median, % of best, status."""
        notes = [self.note] if self.note else []
        notes += [f"skipped {s.name}: {s.reason}" for s in self.skipped]
        notes += [self.search_caption(name) for name in self.searches]  # a kernel's: unnamed
        notes += [f"timed in this process, not in a worker: {n}: {why}" for n, why in self.timed_here.items()]
        rows = [(r.name, r.result) for r in self.candidates]
        note, measure = "\n".join(notes), self.measured_as
        return autotune_table(
            self.title, rows, self.device, self.seconds, best=self.best_name, note=note, measure=measure
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, e.g. for JSON reports."""
        data = {
            "kind": self.kind,
            "name": self.name,
            "key": self.key_text,
            "device": self.device.name,
            "interpreter": self.device.interpreter,
            "best": self.best_name,
            "reference": self.reference,
            "note": self.note,
            "tuning_seconds": self.seconds,
            "cache_hit": self.from_store,
            "n_candidates": max(1, len(self.candidates)),
            "n_failed": len(self.failed),
            "results": [r.to_dict() for r in self.candidates],
            "skipped": [asdict(s) for s in self.skipped],
            "searches": self.searches_to_dict(),
            "phases": dict(self.phases),
            "timed_here": dict(self.timed_here),
            "measured_as": self.measured_as,
            "provisional": self.provisional,
        }
        if self.signature is not None:
            data["signature"] = self.signature.to_data()
        if self.kind == "autotune":
            data["best_config"] = self.best.to_data()
        return data

    def searches_to_dict(self) -> dict[str, dict[str, Any]]:
        """Each searched space's trace as plain data (`SearchTrace.to_dict()`), with its `configs`."""
        return {
            name: {**trace.to_dict(), "configs": trace.candidates} for name, trace in self.searches.items()
        }

    def search_caption(self, space: str) -> str:
        """One line: which strategy searched `space` and how much of it was evaluated (a tuned
        kernel's one space goes unnamed: the table's title names it)."""
        return self.searches[space].summary("" if self.kind == "autotune" else space)

    def summary(self) -> str:
        """One line: the pick, its median and how many candidates failed."""
        failed = list(self.failed.values())
        return (
            f"{self.title}: {self.winner.name} ({self.winner.result.cost(self.measured_as):.4f} ms) "
            f"of {len(self.candidates)} candidates, {len(failed)} failed"
            + (f" ({headline(failed[0].message, 60)})" if failed else "")
        )


#: The name selections used for `TuningRecord`.
SelectionRecord = TuningRecord


def failure_report(failed: str, rows: Sequence[tuple[str, BenchmarkResult]], fix: str) -> str:
    """The message of `NoValidConfigs` and `NoValidChoices`: "all N <failed>:", each candidate and
    why it failed, and what to do (`fix`)."""
    causes = [f"  {name}: {r.status}: {headline(r.message, 300)}" for name, r in rows]
    return "\n".join([f"all {len(rows)} {failed}:", *causes, fix])


def autotune_table(
    title: str,
    rows: Sequence[tuple[str, BenchmarkResult]],
    device: DeviceInfo,
    seconds: float | None = None,
    *,
    best: str | None = None,
    note: str = "",
    measure: str = "graph",
) -> FittingTable:
    """A table of candidates, lowest cost first, that fits the width it is printed at (docs/autotune.md,
    "The AUTOTUNE table"). `measure` says what ranks ("graph" or "eager"); `best` marks the pick, `note`
    says why when that is not the fastest; a line under the table names what the other ranking picks.
    """
    lowest = min((r.cost(measure) for _, r in rows if r.ok), default=None)
    timing = "" if seconds is None else f" in {seconds:.2f} s"
    names, shared = _without_shared([name for name, _ in rows])
    notes = [f"every candidate has {' '.join(shared)}"] if shared else []
    notes += _ranked_otherwise(rows, measure)
    no_host = all(r.timing is None or r.timing.host_ms is None for _, r in rows)
    eager = measure == "eager"
    ranking = "device or host time, the larger (eager)" if eager else "device time (graph)"
    ranked_by = "" if no_host else f", ranked by {ranking}"
    table = FittingTable(
        [
            Column("candidate", wrap=True),
            Column("ms/call", right=True),  # what ranks
            Column("% of best", right=True, drop=3),
            *([Column("device ms", right=True, drop=4)] if eager else []),  # graph: the cost itself
            Column("host ms", right=True, drop=6 if no_host else 5),
            Column("± %", right=True, drop=4),
            Column("runs", right=True, drop=4),
            Column("timer", drop=7),
            Column("compile s", right=True, drop=6),
            Column("status", wrap=True, fit=len("compile_error (stored):")),  # a reason wraps
        ],
        title=f"AUTOTUNE {title} on {device.label}: {len(rows)} candidates{timing}{ranked_by}",
        caption="\n".join([*notes, *([note] if note else [])]),
    )
    for (name, result), shown in sorted(zip(rows, names), key=lambda pair: pair[0][1].cost(measure)):
        timing_cells = ["-"] * (7 if eager else 6)
        if result.timing is not None and lowest is not None:
            t = result.timing
            timing_cells = [
                f"{t.cost(measure):.4f}",
                f"{100 * lowest / t.cost(measure):.1f}%",
                *([f"{t.median_ms:.4f}"] if eager else []),
                "-" if t.host_ms is None else f"{t.host_ms:.4f}",
                f"{100 * t.spread:.1f}",
                str(t.runs),
                t.timer or "-",
            ]
        timing_cells.append("-" if result.compile_s is None else f"{result.compile_s:.2f}")
        status = result.status + (" (stored)" if result.from_store else "")
        if name == best:
            status += ", picked"
        if result.message:
            status += f": {headline(result.message)}"
        table.add_row(shown, *timing_cells, status)
    return table


def _ranked_otherwise(rows: Sequence[tuple[str, BenchmarkResult]], measure: str) -> list[str]:
    """A line when the other way of measuring would put another candidate first, with both figures
    of both; none when they agree or no host time was measured."""
    timed = [(name, r.timing) for name, r in rows if r.timing is not None and r.timing.host_ms is not None]
    if len(timed) < 2:
        return []
    other = "graph" if measure == "eager" else "eager"
    first = min(timed, key=lambda row: row[1].cost(measure))
    first_otherwise = min(timed, key=lambda row: row[1].cost(other))
    if first_otherwise[0] == first[0]:
        return []

    def figures(row: tuple[str, Any]) -> str:
        return f"{row[0]} (device {row[1].median_ms:.4f} ms, host {row[1].host_ms:.4f} ms)"

    how = "with the host in the loop (eager)" if other == "eager" else "by device time alone (graph)"
    return [f"ranked {how}, {figures(first_otherwise)} would beat {figures(first)}"]


def _without_shared(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """`names` less the `name=value` parts every one of them has ("GROUP_M=8"), and those parts;
    nothing is taken out of fewer than two names, nor where a name would be left empty."""
    parts = [name.split(" ") for name in names]
    if len(parts) < 2:
        return list(names), []
    shared = [p for p in parts[0] if "=" in p and all(p in other for other in parts[1:])]
    kept = [[p for p in own if p not in shared] for own in parts]
    if not shared or not all(kept):
        return list(names), []
    return [" ".join(own) for own in kept], shared


#: The version of the line format; a reader skips lines of a version it does not know (`read_log`).
LOG_VERSION = 1


def report_tuning(record: TuningRecord, *, table: bool = True) -> None:
    """A finished tuning's table, printed where `table` and `KERNELPICK_PRINT` say so, and its log line."""
    if table and settings.current().print_tables:
        print_table(record.table())
    log_tuning(record)


def log_tuning(record: TuningRecord) -> None:
    """Append one JSON line describing `record` to the file `KERNELPICK_LOG` names; nothing when unset.
    Never raises: a log that cannot be written costs one warning per path.

    Args:
        record: what one tuning of a kernel or a selector found.
    """
    path = settings.current().log_path
    if path is None:
        return
    try:
        append_line(path, json.dumps(tuning_entry(record), default=str, allow_nan=False))
    except Exception as error:  # a log must never fail the user's call
        message = "kernelpick: the tuning log %s cannot be written (%s); tunings are not logged"
        warn_once(log, f"tuning log {path}", message, path, error)


def tuning_entry(record: TuningRecord) -> dict[str, Any]:
    """The plain data of one log line (docs/reports.md, "The log's lines", lists its fields)."""
    candidates = [
        {
            "name": row.name,
            "description": dict(row.description),
            "status": row.result.status,
            "cost_ms": row.result.cost_ms if row.result.ok else None,
            "timing": None if row.result.timing is None else row.result.timing.to_dict(),
            "message": headline(row.result.message, 300),
            "from_store": row.result.from_store,
            "compile_s": row.result.compile_s,
        }
        for row in record.candidates
    ]
    extra: dict[str, Any] = {"phases": dict(record.phases)}
    key_text = record.key_text
    if record.signature is not None:  # a selector's
        signature = record.signature.to_data()
        key = selection_key(signature)
        key_inputs: Any = canonical_value(signature)
        extra["reference"] = record.reference
        if record.searches:
            extra["searches"] = record.searches_to_dict()
    else:  # a tuned kernel's: its key names, dtypes and specialization (`kernelpick.tune.dispatch`)
        values = record.key[:-1]  # the last value is the device
        names = list(record.key_names)[: len(values)]
        key = {n: canonical_value(v) for n, v in zip(names, values)}
        rest = values[len(names) :]
        key["dtypes"] = [str(v).removeprefix("torch.") for v in rest if not isinstance(v, str)]
        key["specialized"] = next((v for v in rest if isinstance(v, str)), "")
        notable = notable_specialization(key["specialized"])
        shown = [f"{n}={v}" for n, v in zip(names, values)] + key["dtypes"] + ([notable] if notable else [])
        key_text = "(" + ", ".join(shown) + ")"
        key_inputs = canonical_value(values)
        if record.search is not None:
            extra["search"] = record.search.to_dict()
    entry: dict[str, Any] = {
        "version": LOG_VERSION,
        "time": time.time(),
        "pid": os.getpid(),
        "kind": record.kind,
        "name": record.name,
        "key": key,
        "key_text": key_text,
        "key_inputs": json.loads(canonical_json(key_inputs)),
        "device": record.device.name,
        "capability": record.device.capability_text or None,
        "interpreter": record.device.interpreter,
        "toolchain": asdict(Toolchain.current()),
        "seconds": record.seconds,
        "from_store": record.from_store,
        "note": record.note,
        "best": record.best_name,
        **extra,
        "candidates": candidates,
    }
    figures = zip(("flops", "bytes"), work_of(record.name, key))
    return entry | {name: figure for name, figure in figures if figure is not None}


def selection_key(signature: Sequence[Any]) -> dict[str, Any]:
    """A selector's key as work functions and reports see it, from `Signature.to_data()` (or a store
    key's inputs): positional `inputs` (a tensor as {dtype, size, stride, offset}), `kwargs` and the
    selector's own `user_key`."""
    inputs, kwargs, user_key = [*signature, [], [], None][:3]
    return {"inputs": list(inputs), "kwargs": {str(k): v for k, v in kwargs}, "user_key": user_key}
