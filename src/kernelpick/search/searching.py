"""A tuning's search: a strategy proposes configs, the tuning's benchmarker times them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.search.base import Budget
from kernelpick.search.registry import make_strategy
from kernelpick.search.run import SearchTrace, run_search
from kernelpick.search.space import Space

#: Times configs (the tuning's measuring, which adds up the seconds of its phases itself).
MeasureBatch = Callable[[Sequence[Config]], Mapping[Config, BenchmarkResult]]


def search(
    strategy: str,
    configs: Sequence[Config],
    known: Mapping[Config, BenchmarkResult],
    measure: MeasureBatch,
    space: Space | None,
) -> SearchTrace:
    """Search `configs` with the strategy `strategy` names, within the settings' budget and seed (or
    those its options set: `"random(budget=8, seed=1)"`).

    A batch asked for at less than full effort is timed with proportionally fewer runs and no
    second round.

    Args:
        strategy: the strategy and its options, as `search=` gives them; a tuning calls this for any
            strategy but "exhaustive".
        configs: the candidates to search.
        known: what the store already holds, which the strategy sees as timed at no cost.
        measure: the tuning's benchmarker, timing a batch of configs.
        space: the configs' typed dimensions, for strategies that step between neighbours.

    Returns:
        The trace of what the strategy proposed and what each timing gave.
    """
    current = settings.current()

    def timed(batch: Sequence[Config], effort: float) -> Mapping[Config, BenchmarkResult]:
        quick = {"rep_ms": max(1.0, current.rep_ms * effort), "confirm_top": 0} if effort < 1 else {}
        with settings.override(**quick):
            return measure(batch)

    budget = Budget.from_settings(len(configs))
    proposer = make_strategy(strategy, configs, space=space, seed=current.search_seed, budget=budget)
    return run_search(proposer, timed, known=known)
