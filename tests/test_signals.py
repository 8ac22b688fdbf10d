"""signals.py: SIGTERM stops a tuning as Ctrl-C does (the process then ends by it: tests/select/
test_tuning.py sends it to a real tuning), and a program's own SIGTERM handler is left alone."""

from __future__ import annotations

import os
import signal
import threading

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
