"""Search strategies by name, each module imported only when its strategy is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from kernelpick import settings
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.base import Budget, SearchStrategy
from kernelpick.search.space import Space

#: Each strategy's name, and where its class lives (module, class name).
STRATEGIES: dict[str, tuple[str, str]] = {
    "exhaustive": ("kernelpick.search.exhaustive", "ExhaustiveSearch"),
    "random": ("kernelpick.search.random", "RandomSearch"),
    "halving": ("kernelpick.search.halving", "SuccessiveHalving"),
    "pattern": ("kernelpick.search.pattern", "PatternSearch"),
    "model": ("kernelpick.search.model", "ModelGuidedSearch"),
}


def strategy_names() -> tuple[str, ...]:
    """The names `search=` and KERNELPICK_SEARCH accept."""
    return tuple(STRATEGIES)


def strategy_class(name: str) -> type[SearchStrategy]:
    """The strategy class registered as `name`, its module imported now.

    Raises:
        ConfigError: no strategy has that name; the message lists those that do.
    """
    where = STRATEGIES.get(name)
    if where is None:
        raise ConfigError(f"unknown search strategy {name!r}: expected one of {', '.join(strategy_names())}")
    found: type[SearchStrategy] = getattr(importlib.import_module(where[0]), where[1])
    return found


def make_strategy(
    name: str,
    candidates: Sequence[Config],
    *,
    space: Space | None = None,
    seed: int = 0,
    budget: Budget | None = None,
) -> SearchStrategy:
    """A fresh strategy `name` over `candidates` (see `SearchStrategy` for the arguments).

    Raises:
        ConfigError: an unknown name, or arguments the strategy cannot work with.
    """
    return strategy_class(name)(candidates, space=space, seed=seed, budget=budget)


def default_strategy_name() -> str:
    """The strategy KERNELPICK_SEARCH names (default: exhaustive; settings refuse other names)."""
    return settings.current().search
