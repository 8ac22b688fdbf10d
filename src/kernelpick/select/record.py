"""`SelectionRecord`: what selecting for one signature found, and why the winner won; the AUTOTUNE table
that shows candidates and their results to people (`autotune_table`), for selections and tunings alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelpick.bench.result import BenchmarkResult
from kernelpick.console import Column, FittingTable, headline
from kernelpick.device import DeviceInfo
from kernelpick.search.run import SearchTrace
from kernelpick.select.eligibility import SkippedChoice
from kernelpick.select.signature import Signature


@dataclass(frozen=True, slots=True)
class ChoiceResult:
    """How one choice did: its name, digest, description (plain data) and benchmark result."""

    name: str
    digest: str
    description: Mapping[str, Any]
    result: BenchmarkResult

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "digest": self.digest,
            "choice": dict(self.description),
            **self.result.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class SelectionRecord:
    """The outcome of selecting for one input signature.

    `results` has every choice, measured now or read from the store, fastest first among those that
    worked; `best` is the winner's name; `reference` the name of what outputs were checked against
    (None when nothing was verified); `from_store` is True when nothing had to be measured; `note`
    says why the winner is not the fastest, when the reference was kept (`kernelpick.bench.pick`);
    `skipped` has the choices the device does not meet the requirements of, each with the reason;
    `searches` what a search (`Selector(search=...)`) did in each config space it searched, by the
    space's name (`results` then holds only the choices evaluated); `phases` the seconds of its steps
    (expand, table, store_read, compile, benchmark; in workers compile (here, beside the screening),
    prepare (what the workers compile), screen, confirm; store_write;
    wait: for another process or rank tuning the same key, `kernelpick.select.tuning`).
    """

    selector: str
    signature: Signature
    device: DeviceInfo
    results: tuple[ChoiceResult, ...]
    best: str
    seconds: float
    from_store: bool
    reference: str | None = None
    note: str = ""
    skipped: tuple[SkippedChoice, ...] = ()
    searches: Mapping[str, SearchTrace] = field(default_factory=dict)
    phases: Mapping[str, float] = field(default_factory=dict)
    #: The choices measured in this process although isolation was wanted, each with the reason.
    timed_here: Mapping[str, str] = field(default_factory=dict)
    _by_name: dict[str, ChoiceResult] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {r.name: r for r in self.results})

    @property
    def winner(self) -> ChoiceResult:
        return self._by_name[self.best]

    def __getitem__(self, name: str) -> ChoiceResult:
        return self._by_name[name]

    @property
    def failed(self) -> dict[str, BenchmarkResult]:
        return {r.name: r.result for r in self.results if not r.result.ok}

    def table(self) -> FittingTable:
        """The AUTOTUNE table: choice, median, % of best, status."""
        rows = [(r.name, r.result) for r in self.results]
        notes = [self.note] if self.note else []
        notes += [f"skipped {s.name}: {s.reason}" for s in self.skipped]
        notes += [self.search_caption(name) for name in self.searches]
        notes += [
            f"timed in this process, not in a worker: {name}: {why}" for name, why in self.timed_here.items()
        ]
        return autotune_table(
            f"{self.selector}{self.signature}",
            rows,
            self.device,
            self.seconds,
            best=self.best,
            note="; ".join(notes),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, e.g. for JSON reports."""
        return {
            "selector": self.selector,
            "signature": self.signature.to_data(),
            "device": self.device.name,
            "interpreter": self.device.interpreter,
            "best": self.best,
            "reference": self.reference,
            "note": self.note,
            "tuning_seconds": self.seconds,
            "cache_hit": self.from_store,
            "results": [r.to_dict() for r in self.results],
            "skipped": [s.to_dict() for s in self.skipped],
            "searches": self.searches_to_dict(),
            "phases": dict(self.phases),
            "timed_here": dict(self.timed_here),
        }

    def searches_to_dict(self) -> dict[str, dict[str, Any]]:
        """Each searched space's trace as plain data (`SearchTrace.to_dict()`), with its `configs`."""
        return {
            name: {**trace.to_dict(), "configs": trace.candidates} for name, trace in self.searches.items()
        }

    def search_caption(self, space: str) -> str:
        """One line: which strategy searched `space` and how much of it was evaluated."""
        return self.searches[space].summary(space)

    def summary(self) -> str:
        """One line: the winner, its median and how many choices failed."""
        failed = len(self.failed)
        return (
            f"{self.selector}{self.signature}: {self.best} ({self.winner.result.cost_ms:.4f} ms) "
            f"of {len(self.results)} choices, {failed} failed"
            + (f" ({headline(next(iter(self.failed.values())).message, 60)})" if failed else "")
        )


def autotune_table(
    title: str,
    rows: Sequence[tuple[str, BenchmarkResult]],
    device: DeviceInfo,
    seconds: float | None = None,
    *,
    best: str | None = None,
    note: str = "",
) -> FittingTable:
    """A table of candidates, lowest cost first, that fits the width it is printed at.

    Columns: the cost of a call (device or host time, the larger), its share of the lowest cost,
    the device median, the host time per call (selection), the spread (half the interquartile
    range, % of the median), the timed runs, the timer, the seconds its compile took (where
    known), and the status with its reason. Where the console is narrower than that, the timer,
    the compile and host times, the device time (the cost, without host times), the runs and
    spread, then the share go, in that order (a column with nothing in it first); the candidate,
    its cost and its status stay, and wrap. `best` marks what was picked; `note` says why, when that
    is not the fastest. Parameters every candidate shares ("GROUP_M=8") are said once, under the
    table, so that each row shows what sets it apart.

    `title` begins with the name the store knows the kernel or selector by (what `kernelpick cache
    show` takes).
    """
    ok = [r.cost_ms for _, r in rows if r.ok]
    lowest = min(ok) if ok else None
    timing = "" if seconds is None else f" in {seconds:.2f} s"
    names, shared = _without_shared([name for name, _ in rows])
    notes = [f"every candidate has {' '.join(shared)}"] if shared else []
    no_host = all(r.timing is None or r.timing.host_ms is None for _, r in rows)
    table = FittingTable(
        [
            Column("candidate", wrap=True),
            Column("ms/call", right=True),  # on the device: what ranks
            Column("% of best", right=True, drop=3),
            Column("host ms", right=True, drop=6 if no_host else 5),
            Column("± %", right=True, drop=4),
            Column("runs", right=True, drop=4),
            Column("timer", drop=7),
            Column("compile s", right=True, drop=6),
            Column("status", wrap=True, fit=len("compile_error (stored):")),  # a reason wraps
        ],
        title=f"AUTOTUNE {title} on {device.label}: {len(rows)} candidates{timing}",
        caption="\n".join([*notes, *([note] if note else [])]),
    )
    for (name, result), shown in sorted(zip(rows, names), key=lambda pair: pair[0][1].cost_ms):
        timing_cells = ["-"] * 6
        if result.timing is not None and lowest is not None:
            t = result.timing
            timing_cells = [
                f"{t.cost_ms:.4f}",
                f"{100 * lowest / t.cost_ms:.1f}%",
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
