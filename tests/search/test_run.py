"""search/run.py: run_search times what a strategy proposes, once per effort, within the budget,
and its trace says what was timed, when, what the best was along the way and why it stopped."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import pytest

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search import Batch, Budget, Evaluation, SearchStrategy, run_search
from tests.search.synthetic import Bench

CONFIGS = [Config({"BLOCK": 2**i}) for i in range(4, 10)]  # 16 ... 512
TIMES = {c: 1.0 + abs(c.kwargs["BLOCK"] - 128) / 100 for c in CONFIGS}  # 128 is the fastest


class Scripted(SearchStrategy):
    """Proposes the given batches in turn, recording the history it was shown each time."""

    name = "scripted"

    def __init__(self, batches: Sequence[Batch]) -> None:
        super().__init__(CONFIGS)
        self.batches = list(batches)
        self.seen: list[tuple[Evaluation, ...]] = []

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        self.seen.append(tuple(history))
        return self.batches.pop(0) if self.batches else None


def _bench() -> Bench:
    """TIMES, off by +20% below full effort; a second per batch."""
    return Bench(lambda config, effort: TIMES[config] * (1.0 if effort == 1 else 1.2))


def test_a_config_is_timed_once_per_effort_and_again_only_at_a_higher_one() -> None:
    a, b, c = CONFIGS[:3]
    strategy = Scripted(
        [Batch((a, b), 0.25), Batch((a, b, c), 0.25), Batch((b, a, a), 1.0), Batch((b,), 0.5)]
    )
    bench = _bench()
    trace = run_search(strategy, bench.measure, clock=bench.clock)
    assert bench.batches == [([a, b], 0.25), ([c], 0.25), ([b, a], 1.0)]
    assert trace.used == len(trace.evaluations) == 5
    assert trace.stopped == "done"


def test_a_budget_of_evaluations_cuts_the_last_batch() -> None:
    bench = _bench()
    trace = run_search(
        Scripted([Batch(tuple(CONFIGS[:4])), Batch(tuple(CONFIGS[4:]))]), bench.measure, Budget(5)
    )
    assert [len(configs) for configs, _ in bench.batches] == [4, 1]
    assert (trace.used, trace.stopped) == (5, "evaluations")


def test_a_budget_of_seconds_starts_no_batch_once_spent() -> None:
    bench = _bench()
    batches = [Batch((c,)) for c in CONFIGS]
    trace = run_search(Scripted(batches), bench.measure, Budget(max_seconds=2.5), clock=bench.clock)
    assert len(bench.batches) == 3  # started at 0, 1 and 2 seconds
    assert (trace.stopped, trace.seconds) == ("seconds", 3.0)
    assert [e.seconds_at for e in trace.evaluations] == [1.0, 2.0, 3.0]


def test_known_results_are_shown_to_the_strategy_as_full_timings_and_cost_nothing() -> None:
    known = {CONFIGS[3]: BenchmarkResult("ok", TimingSummary.of([0.5]))}
    strategy = Scripted([Batch((CONFIGS[3], CONFIGS[4]))])
    bench = _bench()
    trace = run_search(strategy, bench.measure, Budget(1), clock=bench.clock, known=known)
    assert strategy.seen[0] == (Evaluation(CONFIGS[3], known[CONFIGS[3]], 0.0, 1.0),)
    assert bench.batches == [([CONFIGS[4]], 1.0)]
    assert trace.used == 1 and trace.best is not None and trace.best.config == CONFIGS[3]


def test_the_best_is_taken_among_the_fullest_timings_and_the_curve_follows_it() -> None:
    c16, c32, c64, c128 = CONFIGS[:4]
    strategy = Scripted([Batch((c16, c128), 0.5), Batch((c16,)), Batch((c32, c64))])
    bench = _bench()
    trace = run_search(strategy, bench.measure, clock=bench.clock)
    # c128 is the fastest but was only timed quickly: the full timings decide.
    assert trace.best is not None and trace.best.config == c64
    assert trace.curve() == [(1.0, TIMES[c128] * 1.2), (2.0, TIMES[c16]), (3.0, TIMES[c64])]
    assert trace.results()[c16].median_ms == TIMES[c16]
    data = json.loads(json.dumps(trace.to_dict()))
    assert data["best"] == c64.digest and data["stopped"] == "done" and data["used"] == 5
    assert data["evaluations"][0]["config"] == c16.to_data() and data["evaluations"][0]["effort"] == 0.5
    assert data["curve"][-1] == [3.0, TIMES[c64]]


def test_a_strategy_proposing_only_timed_configs_is_stopped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    strategy = Scripted([Batch((CONFIGS[0],))] * 10)
    bench = _bench()
    with caplog.at_level(logging.WARNING, logger="kernelpick.tune.search"):
        trace = run_search(strategy, bench.measure, clock=bench.clock)
    assert (trace.stopped, trace.used, len(strategy.seen)) == ("stalled", 1, 4)
    assert "proposed only timed configs 3 times" in caplog.text


def test_a_measure_that_leaves_a_config_out_is_refused() -> None:
    def measure(configs: Sequence[Config], effort: float) -> dict[Config, BenchmarkResult]:
        return {}

    with pytest.raises(ConfigError, match="measure returned no result for 2 of 2 configs"):
        run_search(Scripted([Batch(tuple(CONFIGS[:2]))]), measure)


def test_failures_are_kept_in_the_trace_but_never_best() -> None:
    def measure(configs: Sequence[Config], effort: float) -> dict[Config, BenchmarkResult]:
        return {c: BenchmarkResult.failed("out_of_resources", "too big") for c in configs}

    trace = run_search(Scripted([Batch(tuple(CONFIGS[:2]))]), measure)
    assert [e.result.status for e in trace.evaluations] == ["out_of_resources"] * 2
    assert trace.best is None and trace.curve() == []
