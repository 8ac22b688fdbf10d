"""Timing a choice through the call path it will run with: the cost of one call in a stream of calls.

A call costs its device time or the host time it takes to return, whichever is larger: a kernel of
5 µs behind 20 µs of Python and launch overhead runs at 20 µs a call. At small sizes that overhead is
part of what is being chosen, so each timed run counts as the larger of the two.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.device import DeviceInfo
from kernelpick.bench.timers import Benchmarkable, Timer, TimingBudget


def selection_budgets(device: DeviceInfo) -> dict[str, Any]:
    """The keyword arguments of `benchmark()` for selection: the autotuner's on GPUs; on CPUs, at
    least two runs (interpreted kernels take tens of milliseconds a run and two rank them) and as
    many as `rep_ms` allows for fast CPU functions."""
    s = settings.current()
    return budgets_for(device, TimingBudget(s.warmup_ms, s.rep_ms, min(2, s.min_reps), s.max_reps))


#: GPU cycles of the lead kernel queued before each run (about 50 µs at 2 GHz).
LEAD_CYCLES = 100_000


class _HostTimed:
    """A candidate whose every `run` also records the host time it took to return.

    `drain` runs after each run, outside the timing: on a GPU it waits for the device, so that
    the host never gets so far ahead that a launch blocks on a full queue, which would count the
    device's time (the L2 flush's too) as host time.

    `lead` runs before each run's setup: on a GPU it queues a short busy kernel. After a drain
    the GPU is idle, and once it is through the L2 flush it would wait at the start event for the
    host to launch the run, counting that launch as device time; the lead keeps it busy until the
    run is queued. (Without it, selection in workers timed cuBLAS at 2048x4096x4096 on an H200 at a
    median of 118 µs, fastest run 93 µs; with it, 92 µs: bench/results/gemm_suite-h200-before-lead.json
    and gemm_suite-h200.json.)
    """

    def __init__(
        self,
        candidate: Benchmarkable,
        drain: Callable[[], object] | None = None,
        lead: Callable[[], object] | None = None,
    ) -> None:
        self.name = candidate.name
        self.candidate = candidate
        self.drain = drain
        self.lead = lead
        self.host_ms: list[float] = []

    def setup(self) -> object:
        if self.lead is not None:
            self.lead()
        return self.candidate.setup()

    def run(self) -> object:
        start = time.perf_counter()
        result = self.candidate.run()
        self.host_ms.append((time.perf_counter() - start) * 1e3)
        return result

    def teardown(self) -> object:
        result = self.candidate.teardown()
        if self.drain is not None:
            self.drain()
        return result


def _combine(device_ms: list[float], host_ms: list[float]) -> list[float]:
    # The timer's last runs are the timed ones; earlier host times belong to estimates and warm-up.
    host = host_ms[-len(device_ms) :] if device_ms else []
    return [max(d, h) for d, h in zip(device_ms, host)]


def _lead(device: torch.device, cycles: int) -> None:
    with torch.cuda.device(device):
        torch.cuda._sleep(cycles)  # type: ignore[no-untyped-call]


class CallPathTimer:
    """Wraps a timer (CUDA events, wall clock) so that each run counts as max(device time, host time)."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self._drain: Callable[[], object] | None = None
        self._lead: Callable[[], object] | None = None
        device = getattr(timer, "device", None)
        if isinstance(device, torch.device) and device.type == "cuda":
            self._drain = functools.partial(torch.cuda.synchronize, device)
            self._lead = functools.partial(_lead, device, LEAD_CYCLES)

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        wrapped = _HostTimed(candidate, self._drain, self._lead)
        return _combine(self.timer.measure(wrapped, budget, cutoff_ms), wrapped.host_ms)

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        wrapped = [_HostTimed(c, self._drain, self._lead) for c in candidates]
        samples = self.timer.measure_interleaved(wrapped, budget)
        return [_combine(runs, w.host_ms) for runs, w in zip(samples, wrapped)]
