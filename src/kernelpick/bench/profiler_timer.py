"""The profiler timer: each run's kernel time, from the kernels' own durations (CUPTI, torch.profiler)."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from typing import Any

import torch

from kernelpick.bench.timers import Benchmarkable, CudaEventTimer, TimingBudget, run_once
from kernelpick.device import DeviceInfo

log = logging.getLogger("kernelpick.bench")

#: The marker kernel's name, as the profiler reports it ("spin_kernel(long)").
MARKER = "spin_kernel"
#: Profiled runs that estimate a candidate's time, for the first round's cutoff.
QUICK_RUNS = 3


class ProfilerTimer:
    """Times each run as the summed durations of its device activities, read from the profiler."""

    name = "profiler"

    def __init__(self, device: DeviceInfo) -> None:
        self.events = CudaEventTimer(device)
        self.device = self.events.device
        #: Candidates whose last measurement fell back to CUDA events (`benchmarker.timer_used`).
        self.fell_back: set[str] = set()
        self._warned = False

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        # The first runs load the kernel and surface launch errors; timed with events they can read
        # far slow, so the cutoff is checked on a few profiled runs instead.
        estimate = self.events.estimate(candidate)
        for _ in range(budget.warmups_for(estimate)):
            run_once(candidate)
        quick = self._profiled([candidate], QUICK_RUNS) if cutoff_ms is not None else None
        if quick is not None:
            estimate = statistics.median(quick[0])
            if estimate > cutoff_ms:  # type: ignore[operator]  # cutoff_ms is set: quick was made
                return quick[0]
        profiled = self._profiled([candidate], budget.reps_for(estimate))
        return profiled[0] if profiled is not None else self.events.measure(candidate, budget, cutoff_ms)

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        estimate = max(self.events.estimate(c) for c in candidates)
        profiled = self._profiled(candidates, budget.reps_for(estimate))
        return profiled if profiled is not None else self.events.measure_interleaved(candidates, budget)

    def _profiled(self, candidates: Sequence[Benchmarkable], reps: int) -> list[list[float]] | None:
        """Per candidate, `reps` run times in milliseconds (the candidates take turns), or None when
        the profiler cannot be used here (they are then in `fell_back`)."""
        from torch.profiler import ProfilerActivity, profile

        names = {c.name for c in candidates}
        self.fell_back -= names

        try:
            with profile(activities=[ProfilerActivity.CUDA]) as session:
                for _ in range(reps):
                    for candidate in candidates:
                        candidate.setup()
                        self.events.flush()
                        _mark()
                        candidate.run()
                        _mark()
                        candidate.teardown()
                torch.cuda.synchronize(self.device)
            spans = run_spans(_device_activities(session))
        except RuntimeError as error:  # another profiler runs, or the activities could not be read
            if not self._warned:
                self._warned = True
                log.warning("the profiler timer cannot run here (%s); timing with CUDA events", error)
            self.fell_back |= names
            return None
        if len(spans) != reps * len(candidates):
            log.info(
                "the profiler saw %d runs where %d were queued; timing with CUDA events",
                len(spans),
                reps * len(candidates),
            )
            self.fell_back |= names
            return None
        return [spans[index :: len(candidates)] for index in range(len(candidates))]


def run_spans(activities: Sequence[tuple[str, int, int]]) -> list[float]:
    """Milliseconds of device activity between successive pairs of markers.

    Args:
        activities: (name, start, duration) in nanoseconds, of every device activity.
    """
    spans: list[float] = []
    inside, total = False, 0
    for name, _, duration in sorted(activities, key=lambda activity: activity[1]):
        if MARKER in name:
            if inside:
                spans.append(total / 1e6)
                total = 0
            inside = not inside
        elif inside:
            total += duration
    return spans


def _mark() -> None:
    torch.cuda._sleep(1)  # type: ignore[no-untyped-call]


def _device_activities(session: Any) -> list[tuple[str, int, int]]:
    """(name, start, duration) in nanoseconds of each device activity the session recorded."""
    from torch._C._autograd import DeviceType

    results = getattr(session.profiler, "kineto_results", None)
    if results is None:
        raise RuntimeError("the profiler returned no results")
    return [
        (event.name(), event.start_ns(), event.duration_ns())
        for event in results.events()
        if event.device_type() == DeviceType.CUDA
    ]
