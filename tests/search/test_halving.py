"""search/halving.py: quick timings of many configs, the clearly slower dropped, the rest timed
harder, the last round at full effort."""

from __future__ import annotations

import math

from kernelpick.config import Config
from kernelpick.search import Budget, make_strategy, run_search
from tests.search.synthetic import Bench

CONFIGS = [Config({"BLOCK": b}) for b in range(1, 82)]


def _time(config: Config, effort: float) -> float:
    """BLOCK 1 is fastest, each one slower than the last by 1%; multiples of 3 are three times
    slower; the quicker the timing, the larger a config-dependent error (up to 2% at 1/27)."""
    block = config.kwargs["BLOCK"]
    error = 1 + 0.02 * math.sqrt(effort / 27 if effort < 1 else 0) * math.sin(block)
    return (3.0 if block % 3 == 0 else 1.0) * (1 + block / 100) * error


def test_rounds_shrink_and_grow_in_effort_until_a_full_one_and_the_clearly_slower_go_first() -> None:
    bench = Bench(_time)
    trace = run_search(make_strategy("halving", CONFIGS, seed=1), bench.measure)
    efforts = [effort for _, effort in bench.batches]
    assert efforts == [1 / 27, 1 / 9, 1 / 3, 1.0]
    sizes = [len(batch) for batch, _ in bench.batches]
    assert sizes[0] == 81 and sizes == sorted(sizes, reverse=True) and sizes[-1] < 81 / 9
    assert not any(c.kwargs["BLOCK"] % 3 == 0 for c in bench.batches[1][0])  # three times slower: out at once
    assert trace.best is not None and trace.best.config == Config({"BLOCK": 1})
    assert trace.best.effort == 1.0


def test_configs_that_cannot_be_told_apart_from_the_fastest_are_kept() -> None:
    # Within 0.6% of each other, timed with a spread of 1%: none is clearly slower, so half stay.
    def close(config: Config, effort: float) -> float:
        return 1.0 + 0.001 * (config.kwargs["BLOCK"] % 7)

    bench = Bench(close, spread=0.01)
    run_search(make_strategy("halving", CONFIGS[:27], seed=0), bench.measure)
    assert len(bench.batches[1][0]) == 14
    bench = Bench(close, spread=0.0)  # timed exactly: a third stay
    run_search(make_strategy("halving", CONFIGS[:27], seed=0), bench.measure)
    assert len(bench.batches[1][0]) == 9


def test_a_budget_of_evaluations_is_planned_for_by_timing_fewer_configs_first() -> None:
    bench = Bench(_time)
    budget = Budget(max_evaluations=40)
    trace = run_search(make_strategy("halving", CONFIGS, seed=1, budget=budget), bench.measure, budget)
    assert len(bench.batches[0][0]) == 26  # 40 * 2 / 3
    assert bench.batches[-1][1] == 1.0 and trace.used <= 40 and trace.stopped == "done"
