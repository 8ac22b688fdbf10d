"""`SelectionRecord`: what selecting for one signature found, and why the winner won; the AUTOTUNE table
that shows candidates and their results to people (`autotune_table`), for selections and tunings alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.table import Table

from kernelpick.bench.result import BenchmarkResult
from kernelpick.console import headline
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
    (expand, table, store_read, compile, benchmark; in workers prepare, screen, confirm; store_write).
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

    def table(self) -> Table:
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
) -> Table:
    """A table of candidates, lowest cost first.

    Columns: the cost of a call (device or host time, the larger), its share of the lowest cost,
    the device median, the host time per call (selection), the spread (half the interquartile
    range, % of the median), the timed runs, the timer, the seconds its compile took (where
    known), and the status with its reason. `best` marks what was picked; `note` says why, when
    that is not the fastest.
    """
    ok = [r.cost_ms for _, r in rows if r.ok]
    lowest = min(ok) if ok else None
    timing = "" if seconds is None else f" in {seconds:.2f} s"
    # Names, keys and messages are text, never rich markup: "[redis]" or "[constexpr]" must show.
    table = Table(
        title=escape(f"AUTOTUNE {title} on {device.label}: {len(rows)} candidates{timing}"),
        title_justify="left",
        caption=escape(note) or None,
        caption_justify="left",
        box=None,
        pad_edge=False,
    )
    columns = (
        "candidate",
        "ms/call",
        "% of best",
        "device ms",
        "host ms",
        "± %",
        "runs",
        "timer",
        "compile s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("candidate", "timer") else "right")
    table.add_column("status")
    for name, result in sorted(rows, key=lambda row: row[1].cost_ms):
        timing_cells = ["-"] * 7
        if result.timing is not None and lowest is not None:
            t = result.timing
            timing_cells = [
                f"{t.cost_ms:.4f}",
                f"{100 * lowest / t.cost_ms:.1f}%",
                f"{t.median_ms:.4f}",
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
        table.add_row(escape(name), *timing_cells, escape(status))
    return table
