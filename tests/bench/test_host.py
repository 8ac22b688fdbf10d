"""bench/host.py: host time per call, from back-to-back calls with no wait between them."""

from __future__ import annotations

import time

from kernelpick.bench import host
from kernelpick.bench.host import host_ms


class Calls:
    """A call of fixed host time; records when the device was waited for."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.log: list[str] = []

    def run(self) -> None:
        self.log.append("call")
        time.sleep(self.seconds)

    def synchronize(self) -> None:
        self.log.append("sync")


def test_a_device_bound_call_is_judged_by_one_short_batch() -> None:
    calls = Calls(0.0002)
    measured = host_ms(calls.run, calls.synchronize, device_ms=50.0)
    assert 0.2 <= measured < 5.0  # a call's sleep, and sleeps never end early
    assert calls.log.count("call") == host.CALLS // 4
    assert calls.log[0] == "sync" and calls.log[-1] == "sync"  # the device caught up before and after


def test_a_launch_bound_call_is_measured_in_batches_without_waits_between_calls() -> None:
    calls = Calls(0.001)
    measured = host_ms(calls.run, calls.synchronize, device_ms=0.01, calls=4, batches=3)
    assert 1.0 <= measured < 5.0
    # one short batch (2 calls), then 3 batches of 4: a wait before and after each batch only
    assert calls.log.count("call") == 2 + 3 * 4
    assert calls.log == (["sync"] + ["call"] * 2 + ["sync"]) + (["sync"] + ["call"] * 4 + ["sync"]) * 3


def test_interference_in_one_batch_does_not_count() -> None:
    calls = Calls(0.0)
    slow_batches = iter([0.0, 0.004, 0.0005, 0.0005, 0.0005])  # the first is the short batch

    def run() -> None:
        calls.run()

    def synchronize() -> None:
        calls.seconds = next(slow_batches, 0.0005) if calls.log.count("sync") % 2 == 0 else calls.seconds
        calls.synchronize()

    measured = host_ms(run, synchronize, device_ms=0.0, calls=4, batches=4)
    assert 0.5 <= measured < 3.0  # the fastest batch, not the one whose calls took 4 ms each
