"""search/options.py and SearchStrategy.configured: options declared as data, checked, and set on the
strategy; the common ones (budget, seconds, seed) replace the settings' for one search."""

from __future__ import annotations

import pytest

from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search import (
    COMMON_OPTIONS,
    Budget,
    Option,
    make_strategy,
    run_search,
    search_spec,
    strategy_class,
    strategy_names,
)
from kernelpick.search.random import RandomSearch
from tests.search.synthetic import Bench

CONFIGS = [Config({"BLOCK": b}) for b in range(1, 41)]


@pytest.mark.parametrize("name", strategy_names())
def test_every_option_is_declared_with_a_type_a_default_it_takes_and_a_line_of_doc(name: str) -> None:
    chosen = strategy_class(name)
    options = (*COMMON_OPTIONS, *chosen.declared_options())
    assert len({o.name for o in options}) == len(options)  # no strategy hides a common option
    for option in options:
        assert option.name.isidentifier() and option.name != "name"
        assert option.doc and "\n" not in option.doc and option.doc.endswith(".")
        assert option.check(option.default, name) == option.default
        if option in chosen.declared_options():
            assert getattr(chosen, option.name) == option.default  # the class reads the default


def test_an_option_set_reaches_the_strategy_and_the_others_keep_their_defaults() -> None:
    strategy = make_strategy("model(initial=8, min_gain=0.1)", CONFIGS)
    assert (strategy.initial, strategy.min_gain, strategy.batch_size) == (8, 0.1, 24)  # type: ignore[attr-defined]
    bench = Bench(lambda config, effort: 1.0)
    run_search(make_strategy({"name": "random", "batch_size": 7}, CONFIGS), bench.measure)
    assert [len(batch) for batch, _ in bench.batches] == [7, 7, 7, 7, 7, 5]


def test_a_configured_class_is_named_as_search_writes_it_in_declaration_order() -> None:
    configured = strategy_class("random(batch_size=4, seed=3)")
    assert issubclass(configured, RandomSearch) and configured is not RandomSearch
    assert configured.name == "random(seed=3, batch_size=4)"
    assert strategy_class(configured.name).name == configured.name  # what a front keeps, taken again
    assert str(search_spec({"name": "random", "batch_size": 4, "seed": 3})) == configured.name
    assert strategy_class("random") is RandomSearch and strategy_class("random()") is RandomSearch
    assert strategy_class(name="random(batch_size=4, seed=3)").name == configured.name  # as before: `name`
    assert strategy_class("random(seed=None)") is RandomSearch  # None: the setting's value, as unset
    again = configured.configured({"batch_size": 5})
    assert again.name == "random(seed=3, batch_size=5)" and again.__mro__[1] is RandomSearch


def test_budget_seconds_and_seed_replace_the_arguments() -> None:
    strategy = make_strategy("random(budget=0.25, seed=9)", CONFIGS, seed=1, budget=Budget(30, 5.0))
    assert strategy.seed == 9 and strategy.budget == Budget(10, 5.0)  # a quarter of the 40
    counted = make_strategy("random(budget=3, seconds=0)", CONFIGS, budget=Budget(30, 5.0))
    assert counted.budget == Budget(3, None)  # 0 seconds: no limit
    assert make_strategy("random", CONFIGS, seed=1, budget=Budget(30)).budget == Budget(30)
    same = [make_strategy("random(seed=9)", CONFIGS, seed=s).propose(()) for s in (1, 2)]
    assert same[0] == same[1]


def test_an_unknown_option_is_refused_naming_it_and_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        strategy_class("model(budjet=0.1)")
    assert str(raised.value) == (
        "search strategy 'model' has no option 'budjet' (did you mean 'budget'?): its options are "
        "budget, seconds, seed, initial, batch_size, local, explore, stop_after, min_gain, trees, "
        "local_slowdown"
    )
    with pytest.raises(ConfigError, match="search strategy 'pattern' has no option 'reduction': its options"):
        make_strategy({"name": "pattern", "reduction": 2}, CONFIGS)


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ("model(initial=0.5)", "option 'initial' of search strategy 'model' takes an int, got 0.5 (float)"),
        ("random(batch_size=True)", "takes an int, got True (bool)"),
        ("model(min_gain='small')", "option 'min_gain' of search strategy 'model' takes a finite number"),
        ("model(budget=1e999)", "takes a finite number or None, got inf"),
        ("random(batch_size=0)", "option 'batch_size' of search strategy 'random' must be at least 1, got 0"),
        ("halving(reduction=1)", "must be at least 2, got 1"),
        ("random(seconds=-1)", "must be at least 0, got -1"),
        ("annealing(steps=3)", "unknown search strategy 'annealing': expected one of exhaustive, random"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_saying_what_was_expected(search: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        strategy_class(search)


def test_an_option_is_one_of_the_types_the_docs_can_write() -> None:
    assert Option(2.0, "A factor.").type_name == "float"
    assert Option(None, "A count.", kind=int).type_name == "int | None"
    with pytest.raises(TypeError, match="a search option is one of bool, int, float, str, not list"):
        Option([1], "A list.")
