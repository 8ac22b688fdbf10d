"""console.py: error messages in one line, tables on stderr, and progress bars only for long work."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from kernelpick import console, settings
from kernelpick.console import TuningProgress, headline, print_table
from kernelpick.engine.record import autotune_table
from tests.engine.test_record import COMPILER_ERROR, CPU, ROWS


def test_tables_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(autotune_table("add", ROWS, CPU))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "BLOCK=32" in captured.err


# -- headline -------------------------------------------------------------------------------------


def test_headline_of_a_compiler_error_is_its_last_line_with_the_error_kind() -> None:
    assert headline(COMPILER_ERROR) == "CompilationError: arange's range must be a power of 2"


def test_headline_of_one_line_is_that_line() -> None:
    assert headline("  OutOfResources: out of resource: shared memory  ") == (
        "OutOfResources: out of resource: shared memory"
    )


def test_headline_does_not_repeat_the_kind() -> None:
    assert headline("ValueError: bad\n  details\nValueError: the reason") == "ValueError: the reason"


def test_headline_is_cut_to_the_limit() -> None:
    line = headline("RuntimeError: " + "x" * 500, limit=40)
    assert len(line) == 40
    assert line.endswith("...")


def test_headline_of_nothing() -> None:
    assert headline("") == ""
    assert headline("\n  \n") == ""


# -- TuningProgress -------------------------------------------------------------------------------


def test_fast_work_shows_no_progress_even_when_forced_on() -> None:
    with settings.override(progress="on"), TuningProgress("compiling add", total=3) as progress:
        for _ in range(3):
            progress.advance()
        assert progress._bar is None
    assert progress.done == 3


def test_slow_work_shows_a_bar_when_forced_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "PROGRESS_AFTER_SECONDS", 0.01)
    with settings.override(progress="on"), TuningProgress("compiling add", total=4) as progress:
        time.sleep(0.02)
        progress.advance(2, "benchmarking add")
        progress.advance()
        assert progress._bar is not None
        task = progress._bar.tasks[0]
        assert (task.completed, task.total, task.description) == (3, 4, "benchmarking add")
        assert progress._bar.live.is_started
    assert not progress._bar.live.is_started  # stopped when the work ends


def test_progress_off_shows_nothing_however_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "PROGRESS_AFTER_SECONDS", 0.0)
    with settings.override(progress="off"), TuningProgress("compiling add", total=2) as progress:
        progress.advance(2)
        assert progress._bar is None


def test_progress_auto_shows_nothing_without_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "PROGRESS_AFTER_SECONDS", 0.0)
    assert not console.console(stderr=True).is_terminal  # pytest captures stderr
    with settings.override(progress="auto"), TuningProgress("compiling add", total=2) as progress:
        progress.advance(2)
        assert progress._bar is None


# -- console and FittingTable -------------------------------------------------------------------


def small_table() -> console.FittingTable:
    table = console.FittingTable(
        [console.Column("name", wrap=True), console.Column("figure", right=True, drop=1)], title="two rows"
    )
    table.add_row("a rather long name for a row", "1.0")
    table.add_row("short", "2.0")
    return table


def test_piped_output_is_as_wide_as_its_text_and_never_padded(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = console.console()
    assert not out.is_terminal and out.width == console.PIPED_WIDTH
    out.print(small_table())
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "two rows",
        "name                          figure",
        "a rather long name for a row     1.0",
        "short                            2.0",
    ]


def test_columns_says_how_wide_piped_output_may_be(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "20")
    console.console().print(small_table())
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 20
    assert lines[1:] == ["name", "a rather long name", "for a row", "short"]  # the figure went; names wrap


def test_a_warning_is_said_once_per_cause(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("kernelpick.test-warn-once")
    with caplog.at_level(logging.WARNING, logger=log.name):
        for kernel in ("add", "mul", "add"):  # every tuning meets the same cause
            console.warn_once(log, "no worker starts", "%s: timed here: %s", kernel, "no worker starts")
        console.warn_once(log, "the worker died", "%s: timed here: %s", "add", "the worker died")
    assert [r.getMessage() for r in caplog.records] == [
        "add: timed here: no worker starts",
        "add: timed here: the worker died",
    ]


def test_a_process_forked_while_another_thread_says_a_warning_can_warn() -> None:
    # A forked compiler warns through warn_once (a claims folder passed over); a thread of the parent
    # holding its lock at the fork must not leave the child waiting on it for good.
    held, release = threading.Event(), threading.Event()

    def say_slowly() -> None:
        with console._warned_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=say_slowly)
    thread.start()
    held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # the child: warn, then end at once
            console.warn_once(logging.getLogger("kernelpick.test"), "forked", "said in a forked child")
            os._exit(0)
        deadline = time.monotonic() + 10
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0, "the child waited on the lock"
    finally:
        release.set()
        thread.join()
