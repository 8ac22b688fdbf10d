"""search/registry.py: strategies by name, loaded when asked for; and what every registered
strategy promises: it proposes only candidates, ends, keeps to its budget and repeats itself."""

from __future__ import annotations

import subprocess
import sys
import typing
from collections.abc import Sequence

import pytest

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.errors import ConfigError, SettingsError
from kernelpick.search import (
    Budget,
    SearchStrategy,
    SearchTrace,
    default_strategy_name,
    make_strategy,
    run_search,
    strategy_class,
    strategy_names,
)
from kernelpick.search.replay import ReplayBenchmarker
from tests.search.synthetic import gemm_space, recorded_gemm

RECORDED = recorded_gemm(2048, 2048, 2048, small=True)
SEEDED = [name for name in strategy_names() if name != "exhaustive"]


def test_an_unknown_name_is_refused_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        strategy_class("bayes")
    assert str(raised.value) == (
        "unknown search strategy 'bayes': expected one of exhaustive, random, halving, pattern, model"
    )
    with pytest.raises(ConfigError, match="unknown search strategy 'Random'"):
        make_strategy("Random", RECORDED.configs)


def test_strategies_are_imported_only_when_asked_for() -> None:
    code = (
        "import sys, kernelpick.search as s; "
        "print('kernelpick.search.model' in sys.modules, 'sklearn' in sys.modules); "
        "s.strategy_class('model'); print('kernelpick.search.model' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True"]


def test_kernelpick_search_names_the_default_strategy() -> None:
    assert default_strategy_name() == "exhaustive"
    with settings.override(search="model"):
        assert default_strategy_name() == "model"


def test_an_unknown_kernelpick_search_is_refused_naming_the_strategies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = (
        "KERNELPICK_SEARCH='genetic' is not one of 'exhaustive', 'random', 'halving', 'pattern', 'model'"
    )
    with pytest.raises(SettingsError, match=expected), settings.override(search="genetic"):
        pass
    monkeypatch.setenv("KERNELPICK_SEARCH", "genetic")
    with pytest.raises(SettingsError, match=expected):
        settings.from_environ()


def test_the_settings_name_every_registered_strategy() -> None:
    assert typing.get_args(settings.SearchName) == strategy_names()


def _run(
    name: str, seed: int = 0, budget: Budget | None = None
) -> tuple[SearchStrategy, list[Config], SearchTrace]:
    strategy = make_strategy(name, RECORDED.configs, space=gemm_space(small=True), seed=seed, budget=budget)
    replay = ReplayBenchmarker(RECORDED, seed=seed)
    asked: list[Config] = []

    def measure(configs: Sequence[Config], effort: float) -> dict[Config, BenchmarkResult]:
        asked.extend(configs)
        return replay.measure(configs, effort)

    trace = run_search(strategy, measure, budget, clock=replay.clock)
    assert [e.config for e in trace.evaluations] == asked
    return strategy, asked, trace


@pytest.mark.parametrize("name", strategy_names())
def test_every_strategy_proposes_only_candidates_and_ends_by_itself(name: str) -> None:
    strategy, asked, trace = _run(name)
    assert strategy.name == name and trace.stopped == "done"
    assert set(asked) <= set(RECORDED.configs)
    assert len(set(asked)) >= min(24, len(RECORDED))  # it searched, and then it stopped


@pytest.mark.parametrize("name", strategy_names())
def test_every_strategy_keeps_to_a_budget_of_evaluations(name: str) -> None:
    _, asked, _ = _run(name, budget=Budget(max_evaluations=30))
    # Successive halving plans its rounds to fit (20 + 7 timings); the others spend it all.
    assert len(asked) == (27 if name == "halving" else 30)


@pytest.mark.parametrize("name", strategy_names())
def test_every_strategy_stops_proposing_once_the_seconds_are_spent(name: str) -> None:
    _, unlimited, whole = _run(name)
    _, asked, cut = _run(name, budget=Budget(max_seconds=whole.seconds / 4))
    assert cut.stopped == "seconds" and len(asked) < len(unlimited)
    # It starts no batch once the seconds are spent: only the batch under way may overrun them.
    started = [e.seconds_at for e in cut.evaluations[:-1] if e.seconds_at != cut.evaluations[-1].seconds_at]
    assert max(started, default=0.0) < whole.seconds / 4 <= cut.seconds


@pytest.mark.parametrize("name", strategy_names())
def test_every_strategy_repeats_itself_with_the_same_seed(name: str) -> None:
    assert _run(name, seed=3)[1] == _run(name, seed=3)[1]


@pytest.mark.parametrize("name", SEEDED)
def test_strategies_that_draw_at_random_draw_differently_with_another_seed(name: str) -> None:
    assert _run(name, seed=1)[1] != _run(name, seed=2)[1]
