"""Timers of device time (CUDA events, wall clock, CUDA-graph replays, the profiler) and the choice."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelpick import settings
from kernelpick.device import DeviceInfo

log = logging.getLogger("kernelpick.bench")
#: One step of a run queued between an untimed setup and teardown: the run, or a mark around it.
_Step = Callable[[], object]


class Benchmarkable(Protocol):
    """Anything that can be benchmarked: a timed `run` between untimed `setup` and `teardown`.

    One whose host work must happen at every run (a Python hook) says so with `capturable = False`:
    it is then timed with CUDA events, never replayed from a CUDA graph.
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


def _skip() -> None:
    """A step that queues nothing: no mark, or no run (a graph's baseline)."""


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
    """Anything that times candidates, in milliseconds per timed run; `name` says which timer it is."""

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
    return [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
        for _ in range(count)
    ]


class _RunTimer:
    """The steps a timer of each run shares: its first runs size the warm-ups and the timed runs
    (and, past `cutoff_ms`, are all that is timed); interleaved candidates take turns, run by run."""

    #: How many of the first runs count as warm-ups (the wall clock's one timed first run does).
    first_warm_ups = 0

    def first_runs(self, candidate: Benchmarkable) -> list[float]:
        """The first runs' times, which size the rest: one timed run, unless a timer makes more."""
        return self.rounds([candidate], 1)[0]

    def rounds(self, candidates: Sequence[Benchmarkable], reps: int) -> list[list[float]]:
        """Per candidate, `reps` timed runs, the candidates taking turns."""
        raise NotImplementedError

    def estimate(self, candidate: Benchmarkable) -> float:
        return statistics.median(self.first_runs(candidate))

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        first = self.first_runs(candidate)
        estimate = statistics.median(first)
        if cutoff_ms is not None and estimate > cutoff_ms:
            return first  # clearly slower than the best so far: the first runs say enough
        for _ in range(budget.warmups_for(estimate) - self.first_warm_ups):
            run_once(candidate)
        return self.rounds([candidate], budget.reps_for(estimate))[0]

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        estimate = max(self.estimate(c) for c in candidates)
        return self.rounds(candidates, budget.reps_for(estimate))


class CudaEventTimer(_RunTimer):
    """CUDA events around each run; the L2 cache is flushed before each run by writing twice its size."""

    name = "events"

    def __init__(self, device: DeviceInfo) -> None:
        self.device = torch.device("cuda", device.index if device.index is not None else 0)
        size = max(device.l2_bytes, 1 << 20) * FLUSH_L2_MULTIPLE
        self._flush_buffer = torch.empty(size, dtype=torch.int8, device=self.device)

    def flushed(self, candidate: Benchmarkable, run: _Step, start: _Step = _skip, end: _Step = _skip) -> None:
        """Set up, flush the L2 cache (on the current stream), `start()`, `run()`, `end()`, tear down."""
        candidate.setup()
        self._flush_buffer.zero_()
        start()
        run()
        end()
        candidate.teardown()

    def first_runs(self, candidate: Benchmarkable) -> list[float]:
        """A first, untimed run (it loads the kernel and surfaces launch errors), then three timed ones."""
        run_once(candidate)
        torch.cuda.synchronize(self.device)
        return self.rounds([candidate], 3)[0]

    def rounds(self, candidates: Sequence[Benchmarkable], reps: int) -> list[list[float]]:
        each = [timing_events(reps) for _ in candidates]
        for rep in range(reps):
            for candidate, pairs in zip(candidates, each):
                self.flushed(candidate, candidate.run, pairs[rep][0].record, pairs[rep][1].record)
        torch.cuda.synchronize(self.device)
        return [[float(s.elapsed_time(e)) for s, e in pairs] for pairs in each]


class WallClockTimer(_RunTimer):
    """`time.perf_counter` around each run, for CPU devices (Triton's interpreter, CPU library kernels).

    The garbage collector is off while it times, as in `timeit`: in a large process a full collection
    outlasts an interpreted kernel many times over, and one landing in one of two runs reverses a pick.
    """

    name = "wallclock"
    first_warm_ups = 1

    def rounds(self, candidates: Sequence[Benchmarkable], reps: int) -> list[list[float]]:
        samples: list[list[float]] = [[] for _ in candidates]
        collecting = gc.isenabled()
        gc.disable()
        try:
            for _ in range(reps):
                for candidate, out in zip(candidates, samples):
                    candidate.setup()
                    start = time.perf_counter()
                    candidate.run()
                    out.append((time.perf_counter() - start) * 1e3)
                    candidate.teardown()
        finally:
            if collecting:
                gc.enable()
        return samples


@dataclass(eq=False)
class UserBenchTimer:
    """Adapts a Triton-style `do_bench(kernel_call, quantiles)` function; it times setup and teardown too."""

    do_bench: Callable[..., Any]
    name = "user"

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        result = self.do_bench(functools.partial(run_once, candidate), quantiles=(0.5, 0.2, 0.8))
        return [float(result[0] if isinstance(result, (list, tuple)) else result)]

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        return [self.measure(c, budget) for c in candidates]


#: How long one replay of a timed graph should take: long enough that its launch and its two
#: events are noise next to it, short enough for several replays in a brief first round.
REPLAY_MS = 1.0
#: Most runs captured in one graph (its memory grows with them, and long graphs add nothing).
MAX_RUNS_PER_GRAPH = 100
#: Graph replays or profiled runs that estimate a candidate's time, for the first round's cutoff
#: (and the replays to come).
QUICK_RUNS = 3


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
        self.events = CudaEventTimer(device)  # estimates, and what cannot be captured
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
            quick = self._replayed([graphs], QUICK_RUNS)[0]
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
                estimates = [statistics.median(q) for q in self._replayed(graphs, QUICK_RUNS)]
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
        replays = math.ceil(budget.reps_for(max(estimates)) / min(g.runs for g in graphs))
        return int(min(budget.max_reps, max(budget.min_reps, replays)))

    def _capture(self, candidate: Benchmarkable, estimate_ms: float, warmups: int) -> _Graphs | None:
        """The candidate's two graphs, or None when it cannot be captured (it is then timed with events)."""
        if not getattr(candidate, "capturable", True):
            self.fell_back.add(candidate.name)
            return None
        runs = max(1, min(MAX_RUNS_PER_GRAPH, math.ceil(REPLAY_MS / max(estimate_ms, 1e-4))))
        self._stream.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with torch.cuda.stream(self._stream):
                # Warm up on the capture stream: libraries make their per-stream state (cuBLAS's
                # workspace) here, outside the capture, and clocks come up.
                for _ in range(max(1, warmups)):
                    self.events.flushed(candidate, candidate.run)
                timed = self._graph(candidate, runs, candidate.run)
                baseline = self._graph(candidate, runs, _skip)
        except Exception as error:
            _forget_failed_capture(self.device)
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
            torch.cuda.current_stream(self.device).wait_stream(self._stream)
        self.fell_back.discard(candidate.name)
        return _Graphs(timed, baseline, runs)

    def _graph(self, candidate: Benchmarkable, runs: int, run: _Step) -> Any:
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            for _ in range(runs):
                self.events.flushed(candidate, run)
        finally:
            graph.capture_end()  # raises when the capture was invalidated
        return graph

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
        return [
            [
                max((t[0].elapsed_time(t[1]) - b[0].elapsed_time(b[1])) / g.runs, 1e-6)
                for t, b in zip(timed, baseline)
            ]
            for g, (timed, baseline) in zip(graphs, pairs)
        ]


def _forget_failed_capture(device: torch.device) -> None:
    """Undo what a failed capture leaves: the error it raised (the next launch check would see it),
    and the capture it never ended on the device's default random generator, after which every random
    draw outside a graph would fail ("Offset increment outside graph capture encountered unexpectedly"):
    the generator gets a copy of its state, seed and offset kept, so the random sequence goes on."""
    torch.cuda.synchronize(device)
    # An older torch lacks the binding: the error then surfaces once, at worst.
    with contextlib.suppress(Exception):
        torch.cuda.cudart().cudaGetLastError()  # type: ignore[no-untyped-call]
    generator = torch.cuda.default_generators[device.index or 0]
    generator.graphsafe_set_state(generator.clone_state())


#: The marker kernel's name, as the profiler reports it ("spin_kernel(long)"), and a launch of it.
MARKER = "spin_kernel"
_mark = functools.partial(torch.cuda._sleep, 1)


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
        if cutoff_ms is not None and (quick := self._profiled([candidate], QUICK_RUNS)) is not None:
            estimate = statistics.median(quick[0])
            if estimate > cutoff_ms:
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
        from torch._C._autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        names = {c.name for c in candidates}
        self.fell_back -= names
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as session:
                for _ in range(reps):
                    for candidate in candidates:
                        self.events.flushed(candidate, candidate.run, _mark, _mark)
                torch.cuda.synchronize(self.device)
            results = getattr(session.profiler, "kineto_results", None)
            if results is None:
                raise RuntimeError("the profiler returned no results")
            device = [e for e in results.events() if e.device_type() == DeviceType.CUDA]
            spans = run_spans([(e.name(), e.start_ns(), e.duration_ns()) for e in device])
        except RuntimeError as error:  # another profiler runs, or the activities could not be read
            if not self._warned:
                self._warned = True
                log.warning("the profiler timer cannot run here (%s); timing with CUDA events", error)
            self.fell_back |= names
            return None
        queued = reps * len(candidates)
        if len(spans) != queued:
            log.info(
                "the profiler saw %d runs where %d were queued; timing with CUDA events", len(spans), queued
            )
            self.fell_back |= names
            return None
        return [spans[index :: len(candidates)] for index in range(len(candidates))]


def run_spans(activities: Sequence[tuple[str, int, int]]) -> list[float]:
    """Milliseconds of device activity between successive pairs of markers, given every device
    activity's (name, start, duration) in nanoseconds."""
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


#: True where a thread measures beside the program's own calls (tuning in the background): there the
#: "auto" timer is CUDA events, since a CUDA-graph capture made the program's device syncs fail.
beside_the_program: contextvars.ContextVar[bool] = contextvars.ContextVar("kernelpick_beside", default=False)


def timer_for(device: DeviceInfo) -> Timer:
    """The timer `KERNELPICK_TIMER` names for a device (the wall clock on CPUs; CUDA events for "auto"
    `beside_the_program`), one per device and name."""
    name = "wallclock" if device.interpreter else settings.current().timer
    return _timer(device, "events" if name == "auto" and beside_the_program.get() else name)


@functools.cache
def _timer(device: DeviceInfo, name: str) -> Timer:
    if name == "wallclock":
        return WallClockTimer()
    kinds: dict[str, Callable[[DeviceInfo], Timer]] = {"events": CudaEventTimer, "profiler": ProfilerTimer}
    return kinds.get(name, CudaGraphTimer)(device)  # "auto" too
