"""Search strategies: which configs of a large space to time, under a budget of timings and seconds."""

from __future__ import annotations

from kernelpick.tune.search.base import Batch, Budget, Evaluation, SearchStrategy
from kernelpick.tune.search.registry import (
    default_strategy_name,
    make_strategy,
    strategy_class,
    strategy_names,
)
from kernelpick.tune.search.run import Measure, SearchTrace, run_search

__all__ = [
    "Batch",
    "Budget",
    "Evaluation",
    "Measure",
    "SearchStrategy",
    "SearchTrace",
    "default_strategy_name",
    "make_strategy",
    "run_search",
    "strategy_class",
    "strategy_names",
]
