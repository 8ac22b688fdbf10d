"""bench/benchmarker.py: every candidate timed or failed with its reason; the fastest few timed again."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence

import pytest

from kernelpick import settings
from kernelpick.bench.benchmarker import benchmark, budgets_for, classify_run_error, finalists
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.bench.timers import Benchmarkable, TimingBudget, WallClockTimer

QUICK = TimingBudget(warmup_ms=0.0, rep_ms=0.0, min_reps=3, max_reps=3)


def by_name(*candidates: Benchmarkable) -> dict[str, Benchmarkable]:
    return {candidate.name: candidate for candidate in candidates}


def ok(median_ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([median_ms] * 3))


class Sleeper:
    def __init__(self, name: str, run_ms: float) -> None:
        self.name = name
        self.run_ms = run_ms

    def setup(self) -> None:
        pass

    def run(self) -> None:
        time.sleep(self.run_ms / 1e3)

    def teardown(self) -> None:
        pass


class OutOfResources(Exception):
    """Named like Triton's error: a config that asks for more shared memory than the device has."""


class Raiser(Sleeper):
    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(name, 0.0)
        self.error = error

    def run(self) -> None:
        raise self.error


class ScriptedTimer:
    """A timer that reports fixed timings per candidate and records what it was asked to time."""

    def __init__(self, first: dict[str, float], second: dict[str, float]) -> None:
        self.first, self.second = first, second
        self.measured: list[str] = []
        self.cutoffs: list[float | None] = []
        self.interleaved: list[list[str]] = []
        self.budgets: list[TimingBudget] = []

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        self.measured.append(candidate.name)
        self.cutoffs.append(cutoff_ms)
        self.budgets.append(budget)
        candidate.run()  # raises for the failing ones, as a real timer would
        return [self.first[candidate.name]] * 3

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        self.interleaved.append([c.name for c in candidates])
        self.budgets.append(budget)
        return [[self.second[c.name]] * 3 for c in candidates]


def test_the_fastest_candidate_has_the_lowest_median() -> None:
    candidates = by_name(Sleeper("slow", 12.0), Sleeper("fast", 1.0), Sleeper("middle", 5.0))
    results = benchmark(
        candidates, WallClockTimer(), screening=QUICK, confirming=QUICK, confirm_top=2, confirm_within=100.0
    )
    assert all(r.ok and r.timing is not None and r.timing.runs == 3 for r in results.values())
    medians = {name: r.median_ms for name, r in results.items()}
    assert min(medians, key=medians.__getitem__) == "fast"
    assert medians["fast"] < medians["middle"] < medians["slow"]


def test_a_candidate_that_raises_is_recorded_with_its_message_and_others_are_timed() -> None:
    candidates = by_name(Sleeper("a", 0.0), Raiser("b", ValueError("index out of bounds")), Sleeper("c", 0.0))
    results = benchmark(candidates, WallClockTimer(), screening=QUICK)
    assert {n: r.status for n, r in results.items()} == {"a": "ok", "b": "runtime_error", "c": "ok"}
    assert results["b"].message == "ValueError: index out of bounds"
    assert results["b"].timing is None


def test_out_of_resources_is_its_own_status() -> None:
    error = OutOfResources("out of resource: shared memory, Required: 262144, Hardware limit: 232448")
    (result,) = benchmark(by_name(Raiser("big", error)), WallClockTimer(), screening=QUICK).values()
    assert result.status == "out_of_resources"
    assert result.message.startswith("OutOfResources: out of resource: shared memory")


def test_error_messages_are_classified_and_kept_short() -> None:
    assert classify_run_error(RuntimeError()) == ("runtime_error", "RuntimeError")
    status, message = classify_run_error(RuntimeError("x" * 1500 + "y" * 1500))
    assert status == "runtime_error"
    assert len(message) < 2100
    assert message.startswith("RuntimeError: xxx") and message.endswith("yyy")  # both ends kept
    assert "\n...\n" in message


def test_second_round_retimes_only_the_fastest_and_replaces_their_figures() -> None:
    first = {"a": 4.0, "b": 1.0, "c": 3.0, "d": 2.0}
    second = {"b": 2.5, "d": 1.5}
    timer = ScriptedTimer(first, second)
    candidates = by_name(*(Sleeper(name, 0.0) for name in first))
    confirming = TimingBudget(0.0, 40.0, 10, 100)
    results = benchmark(
        candidates, timer, screening=QUICK, confirming=confirming, confirm_top=2, confirm_within=1.0
    )
    assert timer.measured == ["a", "b", "c", "d"]
    assert timer.interleaved == [["b", "d"]]  # fastest first
    assert timer.budgets[-1] == confirming
    # The others are put on the second round's scale: the finalists' median ratio, (2.5 + 0.75) / 2.
    assert [r.median_ms for r in results.values()] == [4.0 * 1.625, 2.5, 3.0 * 1.625, 1.5]


def test_a_candidate_left_out_of_the_second_round_cannot_win_on_its_offset() -> None:
    # Seen on an H200: finalists timed back to back ran about 5 % slower than when screened, and a
    # candidate screened just outside the finalists then looked fastest on its first-round figure.
    first = {"a": 1.90, "b": 1.91, "c": 1.92, "d": 1.94}
    second = {"a": 2.02, "b": 2.00, "c": 2.03}
    timer = ScriptedTimer(first, second)
    results = benchmark(
        by_name(*(Sleeper(name, 0.0) for name in first)),
        timer,
        screening=QUICK,
        confirming=QUICK,
        confirm_top=3,
        confirm_within=0.1,
    )
    medians = {name: r.median_ms for name, r in results.items()}
    assert min(medians, key=medians.__getitem__) == "b"
    assert medians["d"] == pytest.approx(1.94 * 2.03 / 1.92)  # the median ratio is c's


def test_failed_candidates_are_never_retimed() -> None:
    timer = ScriptedTimer({"a": 1.0, "c": 2.0}, {"a": 1.0, "c": 2.0})
    candidates = by_name(Sleeper("a", 0.0), Raiser("b", RuntimeError("boom")), Sleeper("c", 0.0))
    benchmark(candidates, timer, screening=QUICK, confirming=QUICK, confirm_top=3, confirm_within=1.0)
    assert timer.interleaved == [["a", "c"]]


@pytest.mark.parametrize(
    ("confirm_within", "retimed"), [(0.1, [["b", "d"]]), (0.5, [["b", "d", "c"]]), (0.01, [])]
)
def test_second_round_retimes_only_candidates_close_to_the_best(
    confirm_within: float, retimed: list[list[str]]
) -> None:
    # A candidate far slower than the best cannot win; timing it again would only cost time.
    first = {"a": 2.0, "b": 1.0, "c": 1.3, "d": 1.05}
    timer = ScriptedTimer(first, first)
    benchmark(
        by_name(*(Sleeper(name, 0.0) for name in first)),
        timer,
        screening=QUICK,
        confirming=QUICK,
        confirm_top=4,
        confirm_within=confirm_within,
    )
    assert timer.interleaved == retimed


def test_a_noisy_screen_does_not_keep_a_fast_candidate_out_of_the_final() -> None:
    # As on an H200: cuBLAS screened steadily at 0.074 ms; a Triton GEMM's median read 0.082 ms
    # though its fastest runs took 0.071 ms, and it won once timed for longer.
    noisy = TimingSummary.of([0.071, 0.072, 0.082, 0.085, 0.086])
    steady = TimingSummary.of([0.074] * 5)
    slow = TimingSummary.of([0.090, 0.091, 0.092])
    results = {
        n: BenchmarkResult("ok", t) for n, t in (("cublas", steady), ("triton", noisy), ("slow", slow))
    }
    assert finalists(results, top=4, within=0.1) == ["cublas", "triton"]
    assert finalists(results, top=1, within=0.1) == ["cublas"]
    assert finalists({"x": BenchmarkResult.failed("crashed", "")}, top=4, within=0.1) == []


def test_the_reference_is_always_a_finalist() -> None:
    # As on an H100: a brief first look read cuBLAS 15 % slow, behind the close Triton GEMMs.
    results = {name: ok(ms) for name, ms in (("t1", 0.71), ("t2", 0.72), ("t3", 0.73), ("cublas", 0.82))}
    assert finalists(results, top=3, within=0.05) == ["t1", "t2", "t3"]
    assert finalists(results, top=3, within=0.05, reference="cublas") == ["t1", "t2", "cublas"]
    assert finalists(results, top=4, within=0.05, reference="cublas") == ["t1", "t2", "t3", "cublas"]
    assert finalists(results, top=4, within=0.05, reference="t2") == ["t1", "t2", "t3"]
    assert finalists(results, top=4, within=0.05, reference="gone") == ["t1", "t2", "t3"]


def test_confirm_top_still_caps_the_close_candidates() -> None:
    first = {"a": 1.0, "b": 1.01, "c": 1.02, "d": 1.03}
    timer = ScriptedTimer(first, first)
    candidates = by_name(*(Sleeper(name, 0.0) for name in first))
    benchmark(candidates, timer, screening=QUICK, confirming=QUICK, confirm_top=2, confirm_within=0.5)
    assert timer.interleaved == [["a", "b"]]


def test_the_reference_is_timed_again_beside_the_fastest() -> None:
    first = {"a": 1.0, "b": 1.01, "c": 1.02, "reference": 1.5}
    timer = ScriptedTimer(first, first)
    candidates = by_name(*(Sleeper(name, 0.0) for name in first))
    benchmark(
        candidates,
        timer,
        screening=QUICK,
        confirming=QUICK,
        confirm_top=2,
        confirm_within=0.1,
        reference="reference",
    )
    assert timer.interleaved == [["a", "reference"]]


@pytest.mark.parametrize(("confirming", "confirm_top"), [(QUICK, 0), (QUICK, 1), (None, 4)])
def test_no_second_round_without_two_candidates_to_compare(
    confirming: TimingBudget | None, confirm_top: int
) -> None:
    timer = ScriptedTimer({"a": 1.0, "b": 2.0}, {})
    benchmark(
        by_name(Sleeper("a", 0.0), Sleeper("b", 0.0)),
        timer,
        screening=QUICK,
        confirming=confirming,
        confirm_top=confirm_top,
    )
    assert timer.interleaved == []


def test_a_failing_second_round_keeps_the_first_rounds_figures() -> None:
    class FailingSecondRound(ScriptedTimer):
        def measure_interleaved(
            self, candidates: Sequence[Benchmarkable], budget: TimingBudget
        ) -> list[list[float]]:
            raise RuntimeError("device lost")

    timer = FailingSecondRound({"a": 1.0, "b": 2.0}, {})
    results = benchmark(
        by_name(Sleeper("a", 0.0), Sleeper("b", 0.0)),
        timer,
        screening=QUICK,
        confirming=QUICK,
        confirm_top=2,
        confirm_within=1.0,
    )
    assert timer.budgets[-1] == QUICK  # the second round was tried
    assert [r.median_ms for r in results.values()] == [1.0, 2.0]


def test_on_done_is_called_once_per_candidate_with_its_result_failures_included() -> None:
    calls: list[tuple[str, str]] = []
    candidates = by_name(Sleeper("a", 0.0), Raiser("b", RuntimeError("boom")), Sleeper("c", 0.0))
    benchmark(
        candidates,
        WallClockTimer(),
        screening=QUICK,
        confirming=QUICK,
        confirm_top=2,
        confirm_within=1.0,
        on_done=lambda name, result: calls.append((name, result.status)),
    )
    assert calls == [("a", "ok"), ("b", "runtime_error"), ("c", "ok")]


def test_no_candidates_no_results() -> None:
    assert benchmark({}, WallClockTimer(), screening=QUICK, confirming=QUICK, confirm_top=4) == {}


def test_first_round_cutoff_follows_the_best_so_far() -> None:
    timer = ScriptedTimer({"a": 2.0, "b": 1.0, "c": 3.0}, {})
    benchmark(by_name(*(Sleeper(n, 0.0) for n in "abc")), timer, screening=QUICK, cutoff=0.5)
    assert timer.cutoffs == [None, 3.0, 1.5]  # none for the first, then 1.5x the best so far


def test_the_cutoff_starts_from_a_best_measured_elsewhere() -> None:
    # A worker timing one candidate of many is told the fastest median the others found so far.
    timer = ScriptedTimer({"a": 2.0, "b": 1.0}, {})
    benchmark(by_name(*(Sleeper(n, 0.0) for n in "ab")), timer, screening=QUICK, cutoff=0.5, best_ms=0.5)
    assert timer.cutoffs == [0.75, 0.75]


def test_the_cutoff_counts_the_lowest_cost_other_ranks_found_as_it_is_now() -> None:
    # The ranks of a job time parts of one key's candidates: each cuts against the others' best too.
    readings = [float("inf"), 0.5]  # what the other ranks offered before each candidate, then since
    timer = ScriptedTimer({"a": 2.0, "b": 1.0}, {})

    def elsewhere() -> float:
        return readings.pop(0) if len(readings) > 1 else readings[0]

    benchmark(
        by_name(*(Sleeper(n, 0.0) for n in "ab")), timer, screening=QUICK, cutoff=0.5, best_ms=elsewhere
    )
    assert timer.cutoffs == [None, 0.75]  # read again before each candidate


def test_no_finalist_is_slower_than_what_another_rank_found_by_more_than_the_margin() -> None:
    # Another rank's part holds the key's fastest: this part's near-equal candidates cannot win.
    results = {n: ok(ms) for n, ms in {"a": 2.0, "b": 2.1, "c": 2.15}.items()}
    assert finalists(results, 3, 0.1) == ["a", "b", "c"]
    assert finalists(results, 3, 0.1, best_ms=1.0) == []
    assert finalists(results, 3, 0.1, "c", 1.0) == ["c"]  # the reference, however it went


def test_without_a_first_round_every_candidate_is_timed_interleaved() -> None:
    # A worker asked to time finalists again skips the first round it (or another worker) ran.
    timer = ScriptedTimer({}, {"a": 2.0, "b": 1.0})
    confirming = TimingBudget(0.0, 20.0, 10, 100)
    results = benchmark(
        by_name(*(Sleeper(n, 0.0) for n in "ab")), timer, screening=None, confirming=confirming
    )
    assert timer.measured == [] and timer.interleaved == [["a", "b"]]
    assert {n: r.median_ms for n, r in results.items()} == {"a": 2.0, "b": 1.0}


def test_a_failing_round_without_a_first_round_fails_every_candidate() -> None:
    class FailingSecondRound(ScriptedTimer):
        def measure_interleaved(
            self, candidates: Sequence[Benchmarkable], budget: TimingBudget
        ) -> list[list[float]]:
            raise RuntimeError("device lost")

    results = benchmark(
        by_name(Sleeper("a", 0.0)), FailingSecondRound({}, {}), screening=None, confirming=QUICK
    )
    assert {n: (r.status, r.message) for n, r in results.items()} == {
        "a": ("runtime_error", "RuntimeError: device lost")
    }
    with pytest.raises(ValueError, match="screening budget, a confirming budget"):
        benchmark(by_name(Sleeper("a", 0.0)), WallClockTimer(), screening=None)


def test_gpu_budgets_come_from_the_settings() -> None:
    from kernelpick.device import DeviceInfo

    gpu = DeviceInfo("cuda", 0, "NVIDIA H200", (9, 0), 60 << 20, 132)
    with settings.override(rep_ms=7.0, confirm_top=3, confirm_within=0.05, screen_cutoff=0.2):
        budgets = budgets_for(gpu)
        selection = budgets_for(gpu, per_call=True)
    assert budgets["confirm_top"] == 3 and budgets["confirm_within"] == 0.05
    assert budgets["cutoff"] == 0.2
    with settings.override(warmup_ms=3, rep_ms=7, min_reps=2, max_reps=9, confirm_rep_ms=30):
        assert budgets_for(gpu)["screening"] == TimingBudget(3.0, 7.0, 2, 9)
        # The second round does not warm up again and times at least 10 runs of each.
        assert budgets_for(gpu)["confirming"] == TimingBudget(0.0, 30.0, 10, 9)
    with settings.override(min_reps=20):
        assert budgets_for(gpu)["confirming"].min_reps == 20
    # Configs of one kernel share one launcher: only selection measures the host's share of a call.
    assert "host_time" not in budgets and callable(selection["host_time"])
    cpu = DeviceInfo("cpu", None, "cpu", None, 0, 0)
    # Kernels in Triton's interpreter: two runs, since their timings only rank, never predict.
    assert budgets_for(cpu) == {"screening": TimingBudget(0.0, 0.0, 2, 2)}
    assert budgets_for(cpu)["screening"].reps_for(1e-3) == 2
    assert budgets_for(cpu)["screening"].warmups_for(1e-3) == 0
    with settings.override(rep_ms=3.0, min_reps=5):
        assert budgets_for(cpu, per_call=True)["screening"].min_reps == 2
        assert budgets_for(cpu, per_call=True)["screening"].rep_ms == 3.0


def test_wall_clock_timer_stops_early_past_the_cutoff() -> None:
    from kernelpick.bench.timers import WallClockTimer

    slow = Sleeper("slow", 5.0)
    samples = WallClockTimer().measure(slow, TimingBudget(0.0, 50.0, 5, 10), cutoff_ms=1.0)
    assert len(samples) == 1
    assert len(WallClockTimer().measure(slow, TimingBudget(0.0, 0.0, 3, 10))) == 3


def test_the_wall_clock_times_with_the_garbage_collector_off_and_turns_it_back_on() -> None:
    """A full collection in a large process outlasts an interpreted kernel (532 ms where this suite
    reaches tests/tune/test_autotuner.py, whose 10x faster config lost once in CI)."""
    seen: list[bool] = []

    class Watcher(Sleeper):
        def run(self) -> None:
            seen.append(gc.isenabled())

    assert gc.isenabled()
    WallClockTimer().measure(Watcher("a", 0.0), TimingBudget(0.0, 0.0, 3, 3))
    assert seen == [False] * 4 and gc.isenabled()
    with pytest.raises(OSError):
        WallClockTimer().rounds([Raiser("b", OSError("lost"))], 2)
    assert gc.isenabled()
    gc.disable()
    try:
        WallClockTimer().rounds([Watcher("c", 0.0)], 1)
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_host_time_is_measured_for_each_timed_candidate_and_kept_beside_the_device_time() -> None:
    timer = ScriptedTimer({"lib": 1.0, "kernel": 0.8}, {"lib": 1.0, "kernel": 0.8})
    hosts = {"lib": 0.5, "kernel": 2.0}  # the kernel's launch takes longer than it runs
    asked: list[tuple[str, float]] = []

    def host_time(candidate: Benchmarkable, device_ms: float) -> float:
        asked.append((candidate.name, device_ms))
        return hosts[candidate.name]

    results = benchmark(
        by_name(Sleeper("lib", 0.0), Sleeper("kernel", 0.0)),
        timer,
        screening=QUICK,
        confirming=QUICK,
        confirm_top=2,
        confirm_within=10.0,
        host_time=host_time,
    )
    assert asked == [("lib", 1.0), ("kernel", 0.8)]
    lib, kernel = results["lib"], results["kernel"]
    assert lib.timing is not None and lib.timing.host_ms == 0.5 and lib.cost_ms == 1.0
    # The second round keeps each candidate's host time from the first; the device time ranks.
    assert kernel.timing is not None and kernel.timing.host_ms == 2.0 and kernel.cost_ms == 0.8
    assert timer.interleaved == [["kernel", "lib"]]  # finalists by device time: kernel first


def test_each_result_names_the_timer_that_took_it() -> None:
    class Named(ScriptedTimer):
        name = "cudagraph"

    named = Named({"a": 1.0, "b": 2.0}, {})
    named.fell_back = {"b"}  # type: ignore[attr-defined]  # timed with events: it could not be captured
    results = benchmark(by_name(Sleeper("a", 0.0), Sleeper("b", 0.0)), named, screening=QUICK)
    assert [r.timing.timer for r in results.values() if r.timing is not None] == ["cudagraph", "events"]
    unnamed = benchmark(by_name(Sleeper("a", 0.0)), ScriptedTimer({"a": 1.0}, {}), screening=QUICK)
    assert unnamed["a"].timing is not None and unnamed["a"].timing.timer == "ScriptedTimer"
