"""compile/warm.py: what Triton's first compile in a process waits for, done ahead of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kernelpick.compile import warm


def test_after_the_warm_up_tritons_first_specialization_imports_nothing() -> None:
    # A fresh interpreter: this one's first specialization happened long ago.
    script = textwrap.dedent(
        """
        import sys
        from triton.runtime.jit import mangle_type
        from kernelpick.compile.warm import warm_up_compiler
        try:
            warm_up_compiler()
        except Exception:  # no GPU here: the driver's part fails, after the specialization's
            pass
        before = set(sys.modules)
        mangle_type(7)
        print(len(set(sys.modules) - before))
        """
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert found.stdout.split()[-1] == "0"


def test_without_it_the_first_specialization_imports_tritons_modules() -> None:
    script = textwrap.dedent(
        """
        import sys
        from triton.runtime.jit import mangle_type
        before = set(sys.modules)
        mangle_type(7)
        print(len(set(sys.modules) - before))
        """
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(found.stdout.split()[-1]) > 10  # what the warm-up takes off the first tuning


def test_a_compile_that_comes_while_the_warm_up_runs_waits_for_it_and_nothing_runs_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[float] = []

    def slow_warm_up() -> None:
        time.sleep(0.3)
        calls.append(time.monotonic())

    monkeypatch.setattr(warm, "_warm", False)
    monkeypatch.setattr(warm, "_warm_up", slow_warm_up)
    background = threading.Thread(target=warm.warm_up_compiler)  # as start_early runs it
    background.start()
    time.sleep(0.05)
    warm.warm_up_compiler()  # the first compile's
    returned = time.monotonic()
    background.join()
    assert len(calls) == 1 and returned >= calls[0]  # it waited for the one in flight
    warm.warm_up_compiler()
    assert len(calls) == 1


def test_a_warm_up_that_failed_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        raise RuntimeError("0 active drivers")

    monkeypatch.setattr(warm, "_warm", False)
    monkeypatch.setattr(warm, "_warm_up", failing)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            warm.warm_up_compiler()
    assert len(calls) == 2
