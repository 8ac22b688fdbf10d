"""bench/timers.py: what is timed (the run, never setup or teardown), how often, and in which order."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from kernelpick import settings
from kernelpick.bench import timers
from kernelpick.bench.timers import TimingBudget, UserBenchTimer, WallClockTimer, run_spans, timer_for
from kernelpick.device import DeviceInfo, describe


class FakeClock:
    """Stands in for the `time` module inside timers.py: only `run` makes time pass."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class Recorded:
    """A Benchmarkable that logs its calls; its run takes `run_ms` of fake (or, with `sleep`, real) time."""

    def __init__(
        self,
        name: str,
        log: list[str],
        run_ms: float,
        clock: FakeClock | None = None,
        setup_ms: float = 0.0,
    ) -> None:
        self.name = name
        self.log = log
        self.run_ms = run_ms
        self.clock = clock
        self.setup_ms = setup_ms

    def setup(self) -> None:
        self.log.append(f"{self.name}.setup")
        time.sleep(self.setup_ms / 1e3)

    def run(self) -> None:
        self.log.append(f"{self.name}.run")
        if self.clock is None:
            time.sleep(self.run_ms / 1e3)
        else:
            self.clock.now += self.run_ms / 1e3

    def teardown(self) -> None:
        self.log.append(f"{self.name}.teardown")
        time.sleep(self.setup_ms / 1e3)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timers, "time", fake)
    return fake


def runs(log: list[str], name: str) -> int:
    return log.count(f"{name}.run")


# -- TimingBudget ---------------------------------------------------------------------------------


def test_reps_cover_the_rep_time_within_the_limits() -> None:
    budget = TimingBudget(warmup_ms=5.0, rep_ms=10.0, min_reps=3, max_reps=40)
    assert budget.reps_for(2.0) == 5
    assert budget.reps_for(3.0) == 4  # rounded up: at least rep_ms of runs
    assert budget.reps_for(100.0) == 3  # a slow kernel still gets min_reps
    assert budget.reps_for(0.01) == 40  # a fast one no more than max_reps
    assert budget.reps_for(0.0) == 40  # an estimate of zero does not divide by zero


def test_warmups_cover_the_warmup_time_within_max_reps() -> None:
    budget = TimingBudget(warmup_ms=5.0, rep_ms=10.0, min_reps=3, max_reps=40)
    assert budget.warmups_for(2.0) == 3
    assert budget.warmups_for(100.0) == 1
    assert budget.warmups_for(0.0) == 40
    assert TimingBudget(0.0, 10.0, 3, 40).warmups_for(1.0) == 0


# -- WallClockTimer -------------------------------------------------------------------------------


def test_measure_times_each_run_and_follows_the_budget(clock: FakeClock) -> None:
    log: list[str] = []
    samples = WallClockTimer().measure(
        Recorded("a", log, run_ms=2.0, clock=clock), TimingBudget(5.0, 9.0, 1, 100)
    )
    assert samples == pytest.approx([2.0] * 5)  # ceil(9 / 2) timed runs, each on its own
    assert runs(log, "a") == 1 + 2 + 5  # the estimate counts as the first of ceil(5 / 2) warm-ups


def test_measure_runs_at_least_min_reps_and_at_most_max_reps(clock: FakeClock) -> None:
    log: list[str] = []
    slow = Recorded("slow", log, run_ms=50.0, clock=clock)
    assert len(WallClockTimer().measure(slow, TimingBudget(0.0, 10.0, 4, 100))) == 4
    assert runs(log, "slow") == 1 + 4  # no warm-up beyond the estimate
    log.clear()
    fast = Recorded("fast", log, run_ms=0.001, clock=clock)
    assert len(WallClockTimer().measure(fast, TimingBudget(1000.0, 1000.0, 1, 6))) == 6
    assert runs(log, "fast") == 6 + 6  # warm-ups are capped by max_reps too


def test_every_run_is_between_its_own_setup_and_teardown(clock: FakeClock) -> None:
    log: list[str] = []
    WallClockTimer().measure(Recorded("a", log, 1.0, clock), TimingBudget(2.0, 3.0, 1, 10))
    assert log == ["a.setup", "a.run", "a.teardown"] * (len(log) // 3)


def test_setup_and_teardown_are_not_timed() -> None:
    log: list[str] = []
    candidate = Recorded("a", log, run_ms=1.0, setup_ms=20.0)
    samples = WallClockTimer().measure(candidate, TimingBudget(0.0, 0.0, 4, 4))
    assert len(samples) == 4
    assert 0.9 <= statistics.median(samples) < 10.0  # 1 ms of run, not 41 ms of setup + run + teardown


def test_interleaved_candidates_take_turns(clock: FakeClock) -> None:
    log: list[str] = []
    a = Recorded("a", log, run_ms=1.0, clock=clock)
    b = Recorded("b", log, run_ms=4.0, clock=clock)
    samples = WallClockTimer().measure_interleaved([a, b], TimingBudget(0.0, 8.0, 1, 100))
    # As many runs of each as the slowest one needs: ceil(8 / 4).
    assert samples == [pytest.approx([1.0, 1.0]), pytest.approx([4.0, 4.0])]
    order = [entry.split(".")[0] for entry in log if entry.endswith(".run")]
    assert order == ["a", "b", "a", "b", "a", "b"]  # one estimate each, then turns


def test_interleaved_setup_and_teardown_are_not_timed() -> None:
    log: list[str] = []
    a = Recorded("a", log, run_ms=1.0, setup_ms=20.0)
    b = Recorded("b", log, run_ms=1.0, setup_ms=20.0)
    samples = WallClockTimer().measure_interleaved([a, b], TimingBudget(0.0, 0.0, 3, 3))
    assert [len(s) for s in samples] == [3, 3]
    assert all(0.9 <= statistics.median(s) < 10.0 for s in samples)
    assert log == [f"{n}.{step}" for n in "abababab" for step in ("setup", "run", "teardown")]


def test_errors_of_a_run_reach_the_caller(clock: FakeClock) -> None:
    class Broken(Recorded):
        def run(self) -> None:
            raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        WallClockTimer().measure(Broken("x", [], 1.0, clock), TimingBudget(0.0, 1.0, 1, 1))


# -- UserBenchTimer -------------------------------------------------------------------------------


def fake_do_bench(result: Any, calls: list[tuple[float, ...]]) -> Callable[..., Any]:
    def do_bench(fn: Callable[[], object], quantiles: tuple[float, ...] | None = None) -> Any:
        calls.append(tuple(quantiles or ()))
        for _ in range(3):
            fn()
        return result

    return do_bench


def test_user_do_bench_gives_the_median_of_its_quantiles() -> None:
    log: list[str] = []
    calls: list[tuple[float, ...]] = []
    timer = UserBenchTimer(fake_do_bench([0.25, 0.2, 0.3], calls))
    assert timer.measure(Recorded("a", log, 0.0), TimingBudget(0.0, 1.0, 1, 1)) == [0.25]
    assert calls[0][0] == 0.5  # the first quantile asked for is the median, the one kept
    assert log == ["a.setup", "a.run", "a.teardown"] * 3


def test_user_do_bench_returning_one_number() -> None:
    timer = UserBenchTimer(fake_do_bench(0.75, []))
    assert timer.measure(Recorded("a", [], 0.0), TimingBudget(0.0, 1.0, 1, 1)) == [0.75]


def test_user_do_bench_interleaved_measures_each_candidate() -> None:
    log: list[str] = []
    timer = UserBenchTimer(fake_do_bench([1.5], []))
    candidates = [Recorded("a", log, 0.0), Recorded("b", log, 0.0)]
    assert timer.measure_interleaved(candidates, TimingBudget(0.0, 1.0, 1, 1)) == [[1.5], [1.5]]
    assert runs(log, "a") == runs(log, "b") == 3


# -- timer_for ------------------------------------------------------------------------------------


def test_cpu_devices_are_timed_by_the_wall_clock() -> None:
    device = describe(torch.device("cpu"))
    assert isinstance(timer_for(device), WallClockTimer)
    assert timer_for(device) is timer_for(device)


@pytest.mark.gpu
def test_cuda_events_time_a_kernel() -> None:
    from kernelpick.bench.timers import CudaEventTimer

    x = torch.randn(1 << 22, device="cuda")

    class Add:
        name = "add"

        def setup(self) -> None:
            pass

        def run(self) -> None:
            x.add_(1.0)

        def teardown(self) -> None:
            pass

    samples = CudaEventTimer(describe(x.device)).measure(Add(), TimingBudget(1.0, 5.0, 5, 100))
    assert len(samples) >= 5
    assert all(0.0 < s < 100.0 for s in samples)


class Matmul:
    """A bf16 GEMM as a Benchmarkable; `synchronize` makes it uncapturable."""

    def __init__(self, size: int, synchronize: bool = False) -> None:
        self.name = f"mm{size}{'-sync' if synchronize else ''}"
        self.a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        self.synchronize = synchronize

    def setup(self) -> None:
        pass

    def run(self) -> None:
        torch.mm(self.a, self.b)
        if self.synchronize:
            torch.cuda.synchronize()

    def teardown(self) -> None:
        pass


@pytest.mark.gpu
def test_graph_and_profiler_timers_agree_on_a_gemm() -> None:
    import statistics

    from kernelpick.bench.timers import CudaGraphTimer, ProfilerTimer

    info = describe(torch.device("cuda", 0))
    gemm = Matmul(4096)
    budget = TimingBudget(1.0, 20.0, 5, 1000)
    graph = statistics.median(CudaGraphTimer(info).measure(gemm, budget))
    profiled = statistics.median(ProfilerTimer(info).measure(gemm, budget))
    assert 0.05 < graph < 5.0
    assert abs(graph / profiled - 1) < 0.05


@pytest.mark.gpu
def test_a_run_that_synchronizes_is_timed_with_events_and_labelled_so() -> None:
    from kernelpick.bench.benchmarker import benchmark
    from kernelpick.bench.timers import CudaGraphTimer

    timer = CudaGraphTimer(describe(torch.device("cuda", 0)))
    plain, syncing = Matmul(1024), Matmul(1024, synchronize=True)
    results = benchmark({"plain": plain, "syncing": syncing}, timer, screening=TimingBudget(0.5, 5.0, 5, 200))
    assert [r.timing.timer for r in results.values() if r.timing is not None] == ["cudagraph", "events"]
    # The failed capture left the context and the random generator as they were.
    torch.ones(1, device="cuda").add_(1).item()
    torch.manual_seed(3)
    first = torch.randn(8, device="cuda")
    torch.manual_seed(3)
    assert torch.equal(first, torch.randn(8, device="cuda"))


# -- the profiler timer: a run's time is the device activity between its two markers ------------

MARK = "spin_kernel(long)"


def test_each_run_sums_its_kernels_copies_and_memsets_and_nothing_between_runs() -> None:
    activities = [
        ("copy_kernel (setup)", 0, 5_000),
        ("fill_kernel<signed char> (flush)", 10_000, 30_000),
        (MARK, 41_000, 1_000),
        ("gemm_kernel", 43_000, 20_000),
        ("Memset (Device)", 64_000, 1_000),
        (MARK, 66_000, 1_000),
        ("fill_kernel<signed char> (flush)", 70_000, 30_000),
        (MARK, 101_000, 1_000),
        ("gemm_kernel", 103_000, 22_000),
        (MARK, 126_000, 1_000),
    ]
    assert run_spans(activities) == pytest.approx([0.021, 0.022])


def test_activities_are_taken_in_time_order() -> None:
    activities = [(MARK, 30, 1), ("k", 10, 5), (MARK, 0, 1), ("k", 50, 7), (MARK, 40, 1), (MARK, 60, 1)]
    assert run_spans(activities) == pytest.approx([5e-6, 7e-6])


def test_a_run_that_never_closed_is_not_counted() -> None:
    assert run_spans([(MARK, 0, 1), ("k", 2, 5)]) == []


def test_beside_the_programs_calls_the_auto_timer_captures_no_cuda_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A capture in the thread that tunes in the background made the program's own device syncs fail
    # ("operation not permitted when stream is capturing", 14 to 327 of 3,000 calls on an H200).
    monkeypatch.setattr(timers, "_timer", lambda device, name: name)
    h200 = DeviceInfo("cuda", 0, "NVIDIA H200", (9, 0), 60 << 20, 132)
    assert timer_for(h200) == "auto"  # the CUDA-graph timer
    token = timers.beside_the_program.set(True)
    try:
        assert timer_for(h200) == "events"
        with settings.override(timer="cudagraph"):
            assert timer_for(h200) == "cudagraph"  # a timer the user names is the one used
    finally:
        timers.beside_the_program.reset(token)
