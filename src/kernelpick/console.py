"""What people see in a terminal: tables that fit its width, one-line errors, progress bars."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import IO, TypeVar, cast

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kernelpick import settings

_R = TypeVar("_R")


#: How wide output to a pipe or a file may be when `COLUMNS` does not say: a table's rows stay on
#: one line (for logs and grep), each as long as its text, never padded.
PIPED_WIDTH = 300


def console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr): a terminal's width; to a pipe or a file, `COLUMNS` where it
    is set, else as wide as the text is (up to `PIPED_WIDTH`), and no line ends in padding."""
    made = Console(stderr=stderr, highlight=False)
    if made.is_terminal:
        return made
    columns = settings.terminal_columns()
    return Console(file=cast(IO[str], _Unpadded(stderr)), highlight=False, width=columns or PIPED_WIDTH)


class _Unpadded:
    """Standard output or error (looked up at each write, as rich does) without the spaces rich pads
    a table's lines with: nobody sees them in a terminal, but a file or a pipe keeps them all."""

    _PADDING = re.compile(r"[ \t]+(?=\n)")

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    @property
    def _stream(self) -> IO[str]:
        return sys.stderr if self._stderr else sys.stdout

    def write(self, text: str) -> int:
        self._stream.write(self._PADDING.sub("", text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a `FittingTable`: its header, whether it is aligned right (numbers), how soon it
    goes when the table is too wide for its console (0: never; the highest first), and whether its
    text wraps (names, reasons) rather than staying on one line (numbers, words). A wrapping column
    with a `fit` is counted that wide when the table decides which columns fit: a long reason in
    one row wraps rather than costing every row its other columns."""

    header: str
    right: bool = False
    drop: int = 0
    wrap: bool = False
    fit: int | None = None


class FittingTable:
    """A table that fits the width it is printed at: columns go, by their `drop` (columns whose every
    cell is "-" first), until each row fits on one line; then the wrapping columns wrap. The title
    and caption wrap at the console's width. Cells are text, never rich markup."""

    def __init__(self, columns: Sequence[Column], *, title: str = "", caption: str = "") -> None:
        self.columns = list(columns)
        self.title = title
        self.caption = caption
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(self.columns)} columns, got {len(cells)} cells")
        self.rows.append(tuple(cells))

    def table(
        self, shown: Sequence[int] | None = None, *, fitting: bool = False, whole: bool = False
    ) -> Table:
        """A rich table of the columns at indices `shown` (default: all). `fitting`: each wrapping
        column with a `fit` no wider than that, as the table is measured when columns are chosen;
        `whole`: each wrapping column without one as wide as its longest cell (a name is not broken
        where a reason can wrap instead)."""
        indices = range(len(self.columns)) if shown is None else shown
        table = Table(box=None, pad_edge=False, show_edge=False)
        for index in indices:
            column = self.columns[index]
            kept_whole = not column.wrap or (whole and column.fit is None)
            table.add_column(
                column.header,
                justify="right" if column.right else "left",
                no_wrap=kept_whole,
                overflow="ellipsis" if kept_whole else "fold",
                max_width=column.fit if fitting and column.wrap else None,
            )
        for row in self.rows:
            table.add_row(*(Text(row[i]) for i in indices))
        return table

    def fitted(self, console: Console, options: ConsoleOptions) -> tuple[list[int], bool]:
        """The indices of the columns shown at `options.max_width`, and whether they fit on one line
        a row (each reason wrapping within its column's `fit`)."""
        empty = {i for i in range(len(self.columns)) if self.rows and all(r[i] == "-" for r in self.rows)}
        # Empty columns go first, then by `drop`, the highest first; columns alike go together.
        steps = sorted({(i in empty, c.drop) for i, c in enumerate(self.columns) if c.drop}, reverse=True)
        shown = list(range(len(self.columns)))
        unbounded = options.update(width=10 * PIPED_WIDTH)  # a measurement is cut to the width it is given
        while True:
            needed = Measurement.get(console, unbounded, self.table(shown, fitting=True)).maximum
            if needed <= options.max_width or not steps:
                return shown, needed <= options.max_width
            step = steps.pop(0)
            shown = [i for i in shown if (i in empty, self.columns[i].drop) != step]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.title:
            yield Text(self.title)
        shown, fits = self.fitted(console, options)
        yield self.table(shown, whole=fits)
        if self.caption:
            yield Text(self.caption, style="dim")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table())


#: Progress bars appear only once tuning has taken this long.
PROGRESS_AFTER_SECONDS = 1.0


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


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _new_lock_in_child() -> None:
    """A process forked while another thread held `_warned_lock` (a forked compiler, say) gets one free."""
    global _warned_lock
    _warned_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def warn_once(logger: logging.Logger, cause: str, message: str, *args: object) -> None:
    """`logger.warning(message, *args)`, the first time this process meets `cause` (the reason the
    message gives): one cause met by every tuning is said once, not once a tuning."""
    with _warned_lock:
        if (logger.name, cause) in _warned:
            logger.debug(message, *args)
            return
        _warned.add((logger.name, cause))
    logger.warning(message, *args)


def forget_warning(logger: logging.Logger, cause: str) -> None:
    """Let `warn_once` say `cause` again: what it was about has changed (a name registered anew)."""
    with _warned_lock:
        _warned.discard((logger.name, cause))


def print_table(table: RenderableType) -> None:
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

    def on_done(self, then: Callable[[str, _R], object] | None = None) -> Callable[[str, _R], None]:
        """A measurement's `on_done`: a step for each candidate done, which then goes on to `then`
        (a tuning's, which stores its result)."""

        def done(candidate: str, result: _R) -> None:
            self.advance()
            if then is not None:
                then(candidate, result)

        return done

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
