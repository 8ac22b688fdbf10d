"""Searching a space of configs: spaces (`space.py`), search strategies that propose which configs to
time under a budget of timings and seconds, with options declared as data (`options.py`) and set as
`search="model(budget=0.1)"` (`spec.py`), the run that times what they propose, and the replay of
recorded timings that scores them (`replay.py`)."""

from __future__ import annotations

from kernelpick.search.base import Batch, Budget, Evaluation, SearchStrategy
from kernelpick.search.options import COMMON_OPTIONS, Option
from kernelpick.search.registry import (
    default_strategy_name,
    make_strategy,
    search_spec,
    strategy_class,
    strategy_names,
)
from kernelpick.search.run import Measure, SearchTrace, run_search
from kernelpick.search.spec import SearchArgument, SearchSpec

__all__ = [
    "COMMON_OPTIONS",
    "Batch",
    "Budget",
    "Evaluation",
    "Measure",
    "Option",
    "SearchArgument",
    "SearchSpec",
    "SearchStrategy",
    "SearchTrace",
    "default_strategy_name",
    "make_strategy",
    "run_search",
    "search_spec",
    "strategy_class",
    "strategy_names",
]
