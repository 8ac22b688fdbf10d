"""Searching a space of configs: spaces (`space.py`), search strategies that propose which configs to
time under a budget of timings and seconds, the run that times what they propose, and the replay of
recorded timings that scores them (`replay.py`)."""

from __future__ import annotations

from kernelpick.search.base import Batch, Budget, Evaluation, SearchStrategy
from kernelpick.search.registry import (
    default_strategy_name,
    make_strategy,
    strategy_class,
    strategy_names,
)
from kernelpick.search.run import Measure, SearchTrace, run_search

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
