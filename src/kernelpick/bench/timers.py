"""Timers of device time: the protocol, CUDA events, a CPU wall clock, and the choice among them."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelpick import settings
from kernelpick.device import DeviceInfo


class Benchmarkable(Protocol):
    """Anything that can be benchmarked: a timed `run` between untimed `setup` and `teardown`.

    A candidate whose `setup`, `run` or `teardown` does work on the host that must happen at every
    run (a Python hook with side effects) says so with `capturable = False`: it is then timed with
    CUDA events, never replayed from a CUDA graph.
    """

    name: str

    def setup(self) -> object: ...

    def run(self) -> object: ...

    def teardown(self) -> object: ...


def run_once(candidate: Benchmarkable) -> None:
    """Set up, run and tear down `candidate` once, untimed."""
    candidate.setup()
    candidate.run()
    candidate.teardown()


@dataclass(frozen=True, slots=True)
class TimingBudget:
    """How long to warm up and how many runs to time, in milliseconds of kernel time."""

    warmup_ms: float
    rep_ms: float
    min_reps: int
    max_reps: int

    def reps_for(self, estimate_ms: float) -> int:
        return int(min(self.max_reps, max(self.min_reps, math.ceil(self.rep_ms / max(estimate_ms, 1e-6)))))

    def warmups_for(self, estimate_ms: float) -> int:
        return int(min(self.max_reps, math.ceil(self.warmup_ms / max(estimate_ms, 1e-6))))


class Timer(Protocol):
    """Anything that times candidates; returns milliseconds per timed run, and says which timer it
    was in `name`."""

    name: str

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        """Time `candidate`; a timer may stop after a few runs once they all exceed `cutoff_ms`."""
        ...

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        """Time several candidates taking turns, so that drift (clocks, heat) hits them all alike."""
        ...


#: Bytes written per L2 flush, in multiples of the device's L2 size: one L2's worth, written once,
#: need not evict every line the previous run left (replacement is not strictly LRU), so twice it.
FLUSH_L2_MULTIPLE = 2


def timing_events(count: int) -> list[tuple[Any, Any]]:
    """`count` pairs of timing CUDA events."""
    return [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
        for _ in range(count)
    ]


class CudaEventTimer:
    """CUDA events around each run; the L2 cache is flushed before each run by writing twice its size."""

    name = "events"

    def __init__(self, device: DeviceInfo) -> None:
        self.device = torch.device("cuda", device.index if device.index is not None else 0)
        size = max(device.l2_bytes, 1 << 20) * FLUSH_L2_MULTIPLE
        self._flush_buffer = torch.empty(size, dtype=torch.int8, device=self.device)

    def flush(self) -> None:
        """Evict what earlier runs left in the L2 cache (queued on the current stream)."""
        self._flush_buffer.zero_()

    def _timed(self, candidate: Benchmarkable, events: tuple[Any, Any]) -> None:
        candidate.setup()
        self.flush()
        events[0].record()
        candidate.run()
        events[1].record()
        candidate.teardown()

    def first_runs(self, candidate: Benchmarkable) -> list[float]:
        """A first, untimed run (it loads the kernel and surfaces launch errors), then three timed ones."""
        run_once(candidate)
        torch.cuda.synchronize(self.device)
        pairs = timing_events(3)
        for pair in pairs:
            self._timed(candidate, pair)
        torch.cuda.synchronize(self.device)
        return [float(s.elapsed_time(e)) for s, e in pairs]

    def estimate(self, candidate: Benchmarkable) -> float:
        """The median of the first runs' times: what sizes the runs to come."""
        return sorted(self.first_runs(candidate))[1]

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        first = self.first_runs(candidate)
        estimate = sorted(first)[1]
        if cutoff_ms is not None and estimate > cutoff_ms:
            return first  # clearly slower than the best so far: three runs say enough
        for _ in range(budget.warmups_for(estimate)):
            run_once(candidate)
        pairs = timing_events(budget.reps_for(estimate))
        for pair in pairs:
            self._timed(candidate, pair)
        torch.cuda.synchronize(self.device)
        return [float(s.elapsed_time(e)) for s, e in pairs]

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        estimate = max(self.estimate(c) for c in candidates)
        reps = budget.reps_for(estimate)
        each = [timing_events(reps) for _ in candidates]
        for rep in range(reps):
            for candidate, pairs in zip(candidates, each):
                self._timed(candidate, pairs[rep])
        torch.cuda.synchronize(self.device)
        return [[float(s.elapsed_time(e)) for s, e in pairs] for pairs in each]


class WallClockTimer:
    """`time.perf_counter` around each run, for CPU devices (Triton's interpreter, CPU library kernels)."""

    name = "wallclock"

    @staticmethod
    def _timed(candidate: Benchmarkable) -> float:
        candidate.setup()
        start = time.perf_counter()
        candidate.run()
        elapsed = (time.perf_counter() - start) * 1e3
        candidate.teardown()
        return elapsed

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        estimate = self._timed(candidate)
        if cutoff_ms is not None and estimate > cutoff_ms:
            return [estimate]
        for _ in range(budget.warmups_for(estimate) - 1):
            self._timed(candidate)
        return [self._timed(candidate) for _ in range(budget.reps_for(estimate))]

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        estimate = max(self._timed(c) for c in candidates)
        samples: list[list[float]] = [[] for _ in candidates]
        for _ in range(budget.reps_for(estimate)):
            for candidate, out in zip(candidates, samples):
                out.append(self._timed(candidate))
        return samples


class UserBenchTimer:
    """Adapts a Triton-style `do_bench(kernel_call, quantiles)` function; it times setup and teardown too."""

    name = "user"

    def __init__(self, do_bench: Callable[..., Any]) -> None:
        self.do_bench = do_bench

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        result = self.do_bench(functools.partial(run_once, candidate), quantiles=(0.5, 0.2, 0.8))
        return [float(result[0] if isinstance(result, (list, tuple)) else result)]

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        return [self.measure(c, budget) for c in candidates]


def timer_for(device: DeviceInfo) -> Timer:
    """The timer `KERNELPICK_TIMER` names for a device (the wall clock on CPUs), one per device and name."""
    return _timer(device, "wallclock" if device.interpreter else settings.current().timer)


@functools.cache
def _timer(device: DeviceInfo, name: str) -> Timer:
    if name == "wallclock":
        return WallClockTimer()
    if name == "events":
        return CudaEventTimer(device)
    if name == "profiler":
        from kernelpick.bench.profiler_timer import ProfilerTimer

        return ProfilerTimer(device)
    from kernelpick.bench.graph_timer import CudaGraphTimer

    return CudaGraphTimer(device)
