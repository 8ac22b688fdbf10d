"""Signals while kernelpick works: SIGTERM stops a tuning as Ctrl-C does.

A tuning stores each result as it comes (`kernelpick.select.tuning`), so an interrupted one loses
only the candidates in flight. Ctrl-C raises `KeyboardInterrupt`, which already unwinds the tuning:
its workers busy with a candidate and its compilers are killed on the way out. SIGTERM, by default,
ends the process at once, leaving them to finish their work for nobody; within `terminable()` it
raises `Terminated` instead, the same unwinding happens, and then the process ends as SIGTERM ends
it.
"""

from __future__ import annotations

import contextlib
import signal
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
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            yield
            return
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # no signals here (an embedded interpreter)
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


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")
