"""signals.py: SIGTERM stops a tuning as Ctrl-C does (the process then ends by it: tests/select/
test_tuning.py sends it to a real tuning), a program's own SIGTERM handler is left alone, and a
crash in Triton's interpreter ends with one line that names the kernel and KERNELPICK_ISOLATE=on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelpick.signals import terminable


class Stopped(Exception):
    pass


def test_a_programs_own_sigterm_handler_stays_within_a_tuning() -> None:
    def own(signum: int, frame: object) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGTERM, own)
    try:
        with pytest.raises(Stopped), terminable():
            assert signal.getsignal(signal.SIGTERM) is own
            os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_value_error_of_the_block_passes_through_with_the_programs_own_handler() -> None:
    # A tuning's ConfigError is a ValueError: it once met the `except ValueError` meant for
    # processes without signals, and left as "generator didn't stop after throw()".
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        with pytest.raises(ValueError, match="the block's own"), terminable():
            raise ValueError("the block's own")
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def default_sigterm() -> Iterator[None]:
    """SIGTERM with its default action, as a program leaves it (a Ray local cluster, started by an
    earlier test, installs a handler of its own)."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("default_sigterm")
def test_sigterm_is_handled_only_while_tuning_in_the_main_thread() -> None:
    with terminable():
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    seen: list[object] = []

    def tune_in_a_thread() -> None:
        with terminable():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=tune_in_a_thread)
    thread.start()
    thread.join()
    assert seen == [signal.SIG_DFL]


#: An autotuned kernel that stores far out of bounds: in Triton's interpreter, a SIGSEGV.
OUT_OF_BOUNDS = """
import torch, triton, triton.language as tl, kernelpick

@triton.jit
def scribble(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets + (1 << 40), tl.zeros((BLOCK,), tl.float32))

kernel = kernelpick.autotune([kernelpick.Config({"BLOCK": 16}), kernelpick.Config({"BLOCK": 32})], key=["n"])(scribble)
kernel[(1,)](torch.zeros(16), 16)
"""


def _run(tmp_path: Path, *options: str, isolate: str = "auto") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"),
        "KERNELPICK_ISOLATE": isolate,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("PYTHONFAULTHANDLER", None)
    script = tmp_path / "scribble.py"  # Triton reads a kernel's source from its file
    script.write_text(OUT_OF_BOUNDS)
    return subprocess.run(
        [sys.executable, *options, str(script)], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("options", [(), ("-X", "faulthandler")], ids=["plain", "faulthandler"])
def test_a_crash_in_the_interpreter_ends_with_a_line_naming_the_kernel_and_isolation(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    done = _run(tmp_path, *options)
    assert done.returncode == -signal.SIGSEGV  # it still dies as it did, by the signal
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "kernelpick: kernel `scribble` crashed this process (SIGSEGV) in Triton's interpreter"
    )
    assert "KERNELPICK_ISOLATE=on" in last
    if options:  # the traceback faulthandler was asked for comes first
        assert "Fatal Python error: SIGSEGV" in done.stderr and "in _tune" in done.stderr


def test_isolated_the_crash_is_each_configs_failure_and_the_caller_lives(tmp_path: Path) -> None:
    done = _run(tmp_path, isolate="on")
    assert done.returncode == 1
    assert "NoValidConfigs: all 2 configs of kernel `scribble` failed" in done.stderr
    assert done.stderr.count("crashed: the worker died (signal SIGSEGV)") == 2
    assert "KERNELPICK_ISOLATE=on" not in done.stderr  # the worker's crash is the config's


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT with Python's own handler, as an interactive program has it: a process started in the
    background by a shell (`command &`) inherits SIGINT ignored, and Python then leaves it so."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("default_sigterm", "default_sigint")
def test_ctrl_c_that_code_turned_into_another_error_still_stops_the_tuning(tmp_path: Path) -> None:
    # NumPy in Triton's interpreter once turned a Ctrl-C into a TypeError: stored as one config's
    # runtime_error, and the tuning went on. An interrupt is never a candidate's failure.
    import torch

    from kernelpick import Selector, extern
    from kernelpick.store import default_store

    def tuning_in_another_thread() -> None:
        with terminable():  # a tuning of another thread's meanwhile: it once cleared the Ctrl-C noted
            pass

    def slow_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        try:
            # Ctrl-C, landing in code that turns it: sent to this (the main) thread, so that it lands
            # here, not after the try block.
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        except KeyboardInterrupt:
            other = threading.Thread(target=tuning_in_another_thread)
            other.start()
            other.join()
            raise TypeError("only integer scalar arrays can be converted to a scalar index") from None
        return a + b

    selector = Selector("interrupted_add", [extern(torch.add), extern(slow_add)], isolate=False)
    with pytest.raises(KeyboardInterrupt):
        selector(torch.randn(8), torch.randn(8))
    failures = [row for row in default_store().rows() if not row.result.ok]  # type: ignore[attr-defined]
    assert failures == []  # slow_add's "failure" was not stored
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's own handler back
