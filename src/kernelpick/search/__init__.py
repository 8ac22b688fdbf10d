"""Searching a space of configs: search strategies, their options as data, the run, and replays."""

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
