"""What people see in a terminal: a console for tables, error messages in one line, progress bars for
long tuning."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelpick import settings

_R = TypeVar("_R")


def console(stderr: bool = False) -> Console:
    """A console that keeps table rows on one line when writing to a file or a pipe."""
    made = Console(stderr=stderr, highlight=False)
    if not made.is_terminal:
        made.width = 300  # a table of nine columns with a long config name and reason
    return made


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
