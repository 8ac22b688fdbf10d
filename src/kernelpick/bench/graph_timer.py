"""The CUDA-graph timer: many runs captured in a graph, each after an L2 flush, timed as replays."""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelpick.bench.timers import Benchmarkable, CudaEventTimer, TimingBudget, timing_events
from kernelpick.device import DeviceInfo

log = logging.getLogger("kernelpick.bench")

#: How long one replay of a timed graph should take: long enough that its launch and its two
#: events are noise next to it, short enough for several replays in a brief first round.
REPLAY_MS = 1.0
#: Most runs captured in one graph (its memory grows with them, and long graphs add nothing).
MAX_RUNS_PER_GRAPH = 100
#: Replays that estimate a candidate's time, for the first round's cutoff and the replays to come.
QUICK_REPLAYS = 3


@dataclass(slots=True)
class _Graphs:
    """A candidate's two graphs and the runs each replay of `timed` holds."""

    timed: Any
    baseline: Any
    runs: int

    def release(self) -> None:
        self.timed.reset()
        self.baseline.reset()


class CudaGraphTimer:
    """Times runs as CUDA-graph replays, the setups and L2 flushes measured alike and taken off."""

    name = "cudagraph"

    def __init__(self, device: DeviceInfo) -> None:
        #: Estimates, and the timer of candidates that cannot be captured.
        self.events = CudaEventTimer(device)
        self.device = self.events.device
        self._stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
        #: Candidates whose last measurement fell back to CUDA events (`benchmarker.timer_used`).
        self.fell_back: set[str] = set()
        self._reported: set[str] = set()  # those already logged as not capturable

    # -- the Timer protocol --------------------------------------------------------------------
    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        # The first runs load the kernel and surface launch errors. Timed with events, they can read
        # far slow (a Triton launch's host time counts when it outlasts the flush), so they only
        # size the graph; what is compared with the cutoff is replayed.
        first = self.events.estimate(candidate)
        graphs = self._capture(candidate, first, budget.warmups_for(first))
        if graphs is None:
            return self.events.measure(candidate, budget, cutoff_ms)
        try:
            quick = self._replayed([graphs], QUICK_REPLAYS)[0]
            estimate = statistics.median(quick)
            if cutoff_ms is not None and estimate > cutoff_ms:
                return quick  # clearly slower than the best so far: a few replays say enough
            return quick + self._replayed([graphs], self._replays([graphs], [estimate], budget))[0]
        finally:
            graphs.release()

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        firsts = [self.events.estimate(c) for c in candidates]
        captured = [self._capture(c, e, budget.warmups_for(e)) for c, e in zip(candidates, firsts)]
        graphs = [g for g in captured if g is not None]
        uncaptured = [c for c, g in zip(candidates, captured) if g is None]
        try:
            replayed: Iterator[list[float]] = iter([])
            if graphs:
                estimates = [statistics.median(q) for q in self._replayed(graphs, QUICK_REPLAYS)]
                replayed = iter(self._replayed(graphs, self._replays(graphs, estimates, budget)))
            # The others take turns with CUDA events, after the graphs.
            timed = iter(self.events.measure_interleaved(uncaptured, budget) if uncaptured else [])
            return [next(replayed) if g is not None else next(timed) for g in captured]
        finally:
            for g in graphs:
                g.release()

    # -- capturing and replaying ---------------------------------------------------------------
    def _replays(self, graphs: Sequence[_Graphs], estimates: Sequence[float], budget: TimingBudget) -> int:
        """Replays per graph: the budget's runs of the slowest candidate, spread over its graph."""
        slowest = max(estimates)
        runs = min(g.runs for g in graphs)
        return int(min(budget.max_reps, max(budget.min_reps, math.ceil(budget.reps_for(slowest) / runs))))

    def _capture(self, candidate: Benchmarkable, estimate_ms: float, warmups: int) -> _Graphs | None:
        """The candidate's two graphs, or None when it cannot be captured (it is then timed with events)."""
        if not getattr(candidate, "capturable", True):
            self.fell_back.add(candidate.name)
            return None
        runs = max(1, min(MAX_RUNS_PER_GRAPH, math.ceil(REPLAY_MS / max(estimate_ms, 1e-4))))
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with torch.cuda.stream(stream):
                # Warm up on the capture stream: libraries make their per-stream state (cuBLAS's
                # workspace) here, outside the capture, and clocks come up.
                for _ in range(max(1, warmups)):
                    self._one(candidate, timed=True)
                timed = self._graph(candidate, runs, timed=True)
                baseline = self._graph(candidate, runs, timed=False)
        except Exception as error:
            torch.cuda.synchronize(self.device)
            _clear_error()
            _release_generator(self.device)
            self.fell_back.add(candidate.name)
            if candidate.name not in self._reported:
                self._reported.add(candidate.name)
                log.info(
                    "%s cannot be captured in a CUDA graph; timing it with CUDA events: %s",
                    candidate.name,
                    error,
                )
            return None
        finally:
            torch.cuda.current_stream(self.device).wait_stream(stream)
        self.fell_back.discard(candidate.name)
        return _Graphs(timed, baseline, runs)

    def _graph(self, candidate: Benchmarkable, runs: int, *, timed: bool) -> Any:
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            for _ in range(runs):
                self._one(candidate, timed=timed)
        finally:
            graph.capture_end()  # raises when the capture was invalidated
        return graph

    def _one(self, candidate: Benchmarkable, *, timed: bool) -> None:
        candidate.setup()
        self.events.flush()
        if timed:
            candidate.run()
        candidate.teardown()

    def _replayed(self, graphs: Sequence[_Graphs], replays: int) -> list[list[float]]:
        """Per graph, `replays` samples of milliseconds per run: the graphs take turns, each timed
        graph next to its baseline, so that drift (clocks, heat) hits them alike."""
        pairs = [(timing_events(replays), timing_events(replays)) for _ in graphs]
        for replay in range(replays):
            for g, (timed, baseline) in zip(graphs, pairs):
                for graph, (start, end) in ((g.timed, timed[replay]), (g.baseline, baseline[replay])):
                    start.record()
                    graph.replay()
                    end.record()
        torch.cuda.synchronize(self.device)
        samples = []
        for g, (timed, baseline) in zip(graphs, pairs):
            samples.append(
                [
                    max((t[0].elapsed_time(t[1]) - b[0].elapsed_time(b[1])) / g.runs, 1e-6)
                    for t, b in zip(timed, baseline)
                ]
            )
        return samples


def _release_generator(device: torch.device) -> None:
    """Give the device's default random generator a fresh copy of its state: a capture that failed
    never ended its capture on the generator, and every later random draw outside a graph would
    fail ("Offset increment outside graph capture encountered unexpectedly"). The copy keeps the
    seed and offset, so the random sequence goes on as if nothing happened."""
    generator = torch.cuda.default_generators[device.index or 0]
    if hasattr(generator, "clone_state") and hasattr(generator, "graphsafe_set_state"):
        generator.graphsafe_set_state(generator.clone_state())


def _clear_error() -> None:
    """Forget the error a failed capture left (it is not sticky, but the next launch check would see it)."""
    try:
        torch.cuda.cudart().cudaGetLastError()  # type: ignore[no-untyped-call]
    except Exception:  # an older torch without the binding: the error surfaces once, at worst
        pass
