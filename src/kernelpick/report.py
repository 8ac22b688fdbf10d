"""What people see: AUTOTUNE tables, progress bars for long tuning, and plain-data reports."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.device import DeviceInfo

if TYPE_CHECKING:  # a runtime import would be circular: kernelpick.tune imports this module
    from kernelpick.tune.record import TuningRecord


def console(stderr: bool = False) -> Console:
    """A console that keeps table rows on one line when writing to a file or a pipe."""
    made = Console(stderr=stderr, highlight=False)
    if not made.is_terminal:
        made.width = 300  # a table of nine columns with a long config name and reason
    return made


#: Progress bars appear only once tuning has taken this long.
PROGRESS_AFTER_SECONDS = 1.0


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


def record_table(title: str, record: TuningRecord) -> Table:
    """The AUTOTUNE table of one tuning record."""
    rows = [(str(config), result) for config, result in record.results.items()]
    notes = [record.note] if record.note else []
    if record.search is not None:
        notes.append(record.search.summary())
    return autotune_table(
        title, rows, record.device, record.seconds, best=str(record.best), note="\n".join(notes)
    )


def headline(message: str, limit: int = 100) -> str:
    """The line of an error message that says what went wrong (compiler errors put it last)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip() and line.strip() != "^"]
    if not lines:
        return ""
    kind = lines[0].split(":", 1)[0]
    text = lines[-1] if len(lines) > 1 else lines[0]
    if len(lines) > 1 and not text.startswith(kind):
        text = f"{kind}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def print_table(table: Table) -> None:
    """Print to stderr (never stdout: it may carry the program's own output)."""
    console(stderr=True).print(table)


class TuningProgress:
    """A progress bar that shows itself only when the work takes over `PROGRESS_AFTER_SECONDS`.

    `advance` may be called from several threads (compiling and benchmarking overlap).
    """

    def __init__(self, description: str, total: int) -> None:
        self.description = description
        self.total = total
        self.done = 0
        self._started = time.perf_counter()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        mode = settings.current().progress
        self._console = console(stderr=True)
        self._enabled = mode == "on" or (mode == "auto" and self._console.is_terminal)
        self._lock = threading.Lock()

    def __enter__(self) -> TuningProgress:
        return self

    @property
    def enabled(self) -> bool:
        """Whether a bar is shown (once the work takes long enough): on a terminal, or when asked for."""
        return self._enabled

    def advance(self, steps: int = 1, description: str | None = None) -> None:
        with self._lock:
            self._advance(steps, description)

    def _advance(self, steps: int, description: str | None) -> None:
        self.done += steps
        if description is not None:
            self.description = description
        if self._bar is None:
            if not self._enabled or time.perf_counter() - self._started < PROGRESS_AFTER_SECONDS:
                return
            self._bar = Progress(
                TextColumn("[bold]kernelpick[/] {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(escape(self.description), total=self.total)
        assert self._task is not None
        # Text, not markup: the bar's column formats it into "[bold]kernelpick[/] {task.description}".
        self._bar.update(self._task, completed=self.done, description=escape(self.description))

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
