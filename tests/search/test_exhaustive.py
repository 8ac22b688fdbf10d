"""search/exhaustive.py: every candidate once, in one batch (batches under a budget of seconds)."""

from __future__ import annotations

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.config import Config
from kernelpick.search import Budget, make_strategy, run_search
from tests.search.synthetic import Bench

CONFIGS = [Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64, 128, 256) for w in (2, 4, 8)]


def test_every_candidate_is_timed_in_one_batch_in_their_order() -> None:
    bench = Bench(lambda config, effort: 1.0)
    trace = run_search(make_strategy("exhaustive", CONFIGS), bench.measure)
    assert bench.batches == [(CONFIGS, 1.0)]
    assert trace.used == 15


def test_stored_results_are_not_timed_again() -> None:
    bench = Bench(lambda config, effort: 1.0)
    known = {CONFIGS[0]: BenchmarkResult("ok", TimingSummary.of([0.5]))}
    trace = run_search(make_strategy("exhaustive", CONFIGS), bench.measure, known=known)
    assert bench.batches == [(CONFIGS[1:], 1.0)]
    assert trace.best is not None and trace.best.config == CONFIGS[0]


def test_under_a_budget_of_seconds_it_goes_in_batches_the_budget_can_stop() -> None:
    configs = [Config({"BLOCK": b}) for b in range(1, 201)]
    bench = Bench(lambda config, effort: 1.0)
    budget = Budget(max_seconds=2.5)
    trace = run_search(
        make_strategy("exhaustive", configs, budget=budget), bench.measure, budget, bench.clock
    )
    assert [len(batch) for batch, _ in bench.batches] == [64, 64, 64]
    assert [c for batch, _ in bench.batches for c in batch] == configs[:192]
    assert trace.stopped == "seconds"
