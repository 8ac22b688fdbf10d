"""Search strategies by name, each module imported only when its strategy is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from kernelpick import settings
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.base import Budget, SearchStrategy
from kernelpick.search.space import Space
from kernelpick.search.spec import SearchArgument, SearchSpec

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


def strategy_class(name: SearchArgument) -> type[SearchStrategy]:
    """The strategy class registered as `name`, its module imported now. `name` may set options
    (`"model(initial=16)"`, `{"name": "model", "initial": 16}`, as `search=` takes them): then a
    subclass of it that takes them, named as `search=` writes them (`SearchStrategy.configured`).

    Raises:
        ConfigError: no strategy has that name (the message lists those that do), or an option it
            does not have or a value of the wrong type (the message says which, and what it takes).
    """
    spec = SearchSpec.of(name)
    where = STRATEGIES.get(spec.name)
    if where is None:
        raise ConfigError(
            f"unknown search strategy {spec.name!r}: expected one of {', '.join(strategy_names())}"
        )
    found: type[SearchStrategy] = getattr(importlib.import_module(where[0]), where[1])
    return found.configured(dict(spec.options)) if spec.options else found


def search_spec(search: SearchArgument) -> SearchSpec:
    """`search` as a checked spec: a registered strategy, options it has, values of their types,
    in declaration order (`str()` of it is what `search=` takes).

    Raises:
        ConfigError: as `strategy_class`.
    """
    chosen = strategy_class(search)
    return SearchSpec(SearchSpec.of(search).name, tuple(chosen.preset.items()))


def make_strategy(
    name: SearchArgument,
    candidates: Sequence[Config],
    *,
    space: Space | None = None,
    seed: int = 0,
    budget: Budget | None = None,
) -> SearchStrategy:
    """A fresh strategy `name` over `candidates`, with the options `name` sets (see `strategy_class`
    and `SearchStrategy`; the options `seed`, `budget` and `seconds` replace `seed` and `budget`'s limits).

    Raises:
        ConfigError: an unknown name or option, or arguments the strategy cannot work with.
    """
    return strategy_class(name)(candidates, space=space, seed=seed, budget=budget)


def default_strategy_name() -> str:
    """The strategy KERNELPICK_SEARCH names, with its options as `search=` writes them (default:
    exhaustive; settings refuse other names).

    Raises:
        ConfigError: the setting sets an option the strategy does not have, or a wrong value.
    """
    setting = settings.current().search
    if setting in STRATEGIES:  # a bare name, checked when read: no options, nothing to import yet
        return setting
    try:
        return strategy_class(setting).name
    except ConfigError as error:
        raise ConfigError(f"KERNELPICK_SEARCH={setting!r}: {error}") from None
