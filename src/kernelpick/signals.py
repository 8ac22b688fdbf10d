"""Signals during a tuning: SIGTERM stops it as Ctrl-C does; a crash in the interpreter names its kernel."""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import functools
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType


class Terminated(BaseException):
    """SIGTERM arrived during a tuning (`terminable`). Not an `Exception`, as `KeyboardInterrupt`
    is not: code that records a candidate's failure (`except Exception`) must let it through."""


@contextlib.contextmanager
def terminable() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` in the main thread; once that has left the
    block (its cleanup done), the process ends by SIGTERM's default action, as it would have.

    Only in the main thread (where Python runs signal handlers) and only while SIGTERM has its
    default action: a handler of the program's own stays, and so does an enclosing block's.

    Why: by default SIGTERM ends the process at once, leaving a tuning's workers and compilers to
    finish their work for nobody. Raised, it unwinds the tuning as Ctrl-C's `KeyboardInterrupt`
    does, killing them on the way out; a tuning stores each result as it comes, so only the
    candidates in flight are lost.
    """
    global _interrupted
    noting = _note_sigint()
    if noting:  # the main thread's outermost block: a tuning in another thread must not clear it
        _interrupted = False
    previous = _take_sigterm()
    try:
        if previous is None:
            yield
            return
        try:
            yield
        except Terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)  # ends the process
            raise  # pragma: no cover - not reached
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        if noting:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _interrupted = False  # a Ctrl-C of this block is not a later candidate's failure


#: Whether Ctrl-C arrived during the main thread's current `terminable` block (only that block sets
#: and clears it: a tuning in another thread, which could not note a Ctrl-C, leaves it alone).
_interrupted = False


def interrupted() -> bool:
    """Whether Ctrl-C arrived during the current tuning: whatever a candidate then raised (C code,
    NumPy in Triton's interpreter, may turn the KeyboardInterrupt into a TypeError) is the
    interruption, not the candidate's failure."""
    return _interrupted


def raise_if_interrupted(error: BaseException) -> None:
    """Raise KeyboardInterrupt (from `error`) if Ctrl-C arrived during the current tuning.

    Raises:
        KeyboardInterrupt: it did.
    """
    if _interrupted:
        raise KeyboardInterrupt from error


def _note_sigint() -> bool:
    """Make Ctrl-C note itself before raising KeyboardInterrupt as Python does, in the main thread
    while SIGINT has Python's own handler; whether it did (a program's own handler stays)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        signal.signal(signal.SIGINT, _noted_interrupt)
    except ValueError:  # no signals here (an embedded interpreter)
        return False
    return True


def _noted_interrupt(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _take_sigterm() -> signal.Handlers | None:
    """Make SIGTERM raise `Terminated` here, if this is the main thread and SIGTERM has its default
    action; SIGTERM's previous handler, or None where it was left alone. (The block's own errors,
    a `ValueError` among them, must not meet the `except` for a process without signals.)"""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None
        return signal.signal(signal.SIGTERM, _raise_terminated)  # type: ignore[return-value]
    except ValueError:  # no signals here (an embedded interpreter)
        return None


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")


# -- a crash in the interpreter ------------------------------------------------------------------

#: The signals a load or store out of bounds raises.
_CRASHES = (signal.SIGSEGV, signal.SIGBUS)


class _SigAction(ctypes.Structure):
    """Linux's `struct sigaction` (glibc and musl, x86-64 and AArch64): saved and put back whole,
    flags and all, so that whatever handler was there (faulthandler's, say) is left as it was."""

    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ubyte * 128),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


_Handler = ctypes.CFUNCTYPE(None, ctypes.c_int)
_lock = threading.Lock()
_depth = 0  # launches in progress, over all threads
_saved: dict[int, _SigAction] = {}
_running = threading.local()  # the kernel each thread launches
#: False in a worker process, whose crash its pool records as the candidate's (`kernelpick.workers`).
crash_hints = True


def _crash_line(kernel: str, signum: int) -> bytes:
    return (
        f"kernelpick: kernel `{kernel}` crashed this process ({signal.Signals(signum).name}) in Triton's "
        "interpreter, most likely by a load or store out of bounds; with KERNELPICK_ISOLATE=on candidates "
        "run in a worker process, where a crash is recorded as that candidate's failure\n"
    ).encode()


def _on_crash(signum: int) -> None:  # pragma: no cover - runs as the process dies (a subprocess test)
    """In the C signal handler: the traceback when faulthandler is on (it would print its own after
    this line), the line, then the action that was there before (the default: the process ends, as
    the faulting instruction runs again)."""
    if faulthandler.is_enabled():
        os.write(2, f"Fatal Python error: {signal.Signals(signum).name}\n\n".encode())
        faulthandler.dump_traceback(sys.stderr.fileno(), all_threads=True)
        _sigaction(signum, _SigAction())  # SIG_DFL: faulthandler has nothing to add
    else:
        _sigaction(signum, _saved.get(signum, _SigAction()))
    os.write(2, _crash_line(getattr(_running, "kernel", "?"), signum))


_handler = _Handler(_on_crash)  # kept alive: the C handler calls it


def _sigaction(signum: int, action: _SigAction) -> _SigAction:
    """Install `action` for `signum`; the one it replaces."""
    old = _SigAction()
    _libc().sigaction(signum, ctypes.byref(action), ctypes.byref(old))
    return old


@contextlib.contextmanager
def naming_crashes(kernel: str) -> Iterator[None]:
    """Within the block (a launch in Triton's interpreter), a crash writes one line to stderr naming
    `kernel` and `KERNELPICK_ISOLATE=on` before the process ends as it would have. Linux only, and not
    in a worker process; blocks nest, in any threads."""
    global _depth
    if not crash_hints or not sys.platform.startswith("linux"):
        yield
        return
    outer = getattr(_running, "kernel", None)
    _running.kernel = kernel
    with _lock:
        if _depth == 0:
            ours = _SigAction(ctypes.cast(_handler, ctypes.c_void_p).value)
            for signum in _CRASHES:
                _saved[signum] = _sigaction(signum, ours)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for signum in _CRASHES:
                    _sigaction(signum, _saved.pop(signum))
        _running.kernel = outer


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sigaction.argtypes = [ctypes.c_int, ctypes.POINTER(_SigAction), ctypes.POINTER(_SigAction)]
    libc.sigaction.restype = ctypes.c_int
    return libc
