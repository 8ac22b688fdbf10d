"""search/searching.py with the autotuner and the selector: search= (options too), KERNELPICK_SEARCH and
budgets, spaces, a store that starts searches warm."""

from __future__ import annotations

from itertools import groupby

import pytest
import torch
import triton

import kernelpick
from kernelpick import extern, settings, template
from kernelpick.engine.choice_measuring import ChoiceMeasuring
from kernelpick.errors import ConfigError, SettingsError
from kernelpick.search.registry import default_strategy_name
from kernelpick.search.run import SearchTrace
from kernelpick.search.space import Space
from kernelpick.store import MemoryStore
from tests.select.search_choices import CONFIGS, DOUBLE, double
from tests.tune.kernels import add_kernel, grid_1d

SPACE = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64, 128, 256) for w in (1, 2)]


def add(kernel: kernelpick.Autotuner, n: int = 256) -> None:
    x = torch.randn(n)
    out = torch.empty(n)
    kernel[grid_1d(n)](x, x, out, n)
    torch.testing.assert_close(out, x + x)


def test_a_search_times_only_its_budget_and_the_store_keeps_every_timing() -> None:
    store = MemoryStore()
    kernel = kernelpick.autotune(SPACE, key=["n"], search="random", store=store)(add_kernel)
    with settings.override(search_budget=4, search_seed=7):
        add(kernel)
    record = kernel.last_tuning
    assert record is not None and record.search is not None
    assert record.search.strategy == "random" and record.search.used == 4
    assert len(record.results) == 4 and record.best in record.results
    assert sum(len(rows) for rows in store._rows.values()) == 4

    warm = kernelpick.autotune(SPACE, key=["n"], search="random", store=store)(add_kernel)
    with settings.override(search_budget=4, search_seed=8):
        add(warm)
    again = warm.last_tuning
    assert again is not None and again.search is not None
    assert len(again.search.evaluations) - again.search.used == 4  # the stored four, known at no cost
    assert again.search.used == 4 and sum(len(rows) for rows in store._rows.values()) == 8


def test_the_same_seed_searches_the_same_configs() -> None:
    picked = []
    for _ in range(2):
        kernel = kernelpick.autotune(SPACE, key=["n"], search="random", store=MemoryStore())(add_kernel)
        with settings.override(search_budget=3, search_seed=1):
            add(kernel)
        assert kernel.last_tuning is not None
        picked.append(set(kernel.last_tuning.results))
    assert picked[0] == picked[1]


def test_kernelpick_search_names_the_default_strategy_and_a_wrong_name_is_refused() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    with settings.override(search="pattern", search_budget=3):
        add(kernel)
    assert kernel.last_tuning is not None and kernel.last_tuning.search is not None
    assert kernel.last_tuning.search.strategy == "pattern"
    with pytest.raises(ConfigError, match="unknown search strategy 'annealing': expected one of exhaustive"):
        kernelpick.autotune(SPACE, key=["n"], search="annealing")(add_kernel)


def test_exhaustive_times_every_config_without_a_trace() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    add(kernel)
    assert kernel.last_tuning is not None and kernel.last_tuning.search is None
    assert len(kernel.last_tuning.results) == len(SPACE)


def test_a_space_is_tuned_over_its_configs_that_pass_the_constraint() -> None:
    space = Space(BLOCK=[16, 32, 64, 128], num_warps=[1, 2], constraint=lambda c: c["BLOCK"] >= 32)
    kernel = kernelpick.autotune(space, key=["n"], store=MemoryStore())(add_kernel)
    add(kernel)
    assert kernel.last_tuning is not None
    assert sorted({c.kwargs["BLOCK"] for c in kernel.last_tuning.results}) == [32, 64, 128]
    assert len(kernel.last_tuning.results) == 6


def test_a_search_compiles_with_patience_and_does_not_store_a_skipped_config(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from kernelpick.bench.result import BenchmarkResult
    from kernelpick.compile.forked import Patience
    from kernelpick.compile.precompile import _patience

    store = MemoryStore()
    kernel = kernelpick.autotune(SPACE, key=["n"], search="random", store=store)(add_kernel)
    measure = ChoiceMeasuring.measure
    seen: list[Patience | None] = []
    slow = kernel.configs[3]

    def measure_but_slow(  # type: ignore[no-untyped-def]
        self, todo, finished=None, best_ms=lambda: float("inf")
    ):
        seen.append(_patience.get())  # what a forked compile started here would obey
        results = measure(self, [c for c in todo if c.digest != slow.digest], finished, best_ms)
        if slow.digest in {c.digest for c in todo}:  # as if its compile had outlasted the batch's patience
            results[slow.digest] = BenchmarkResult.failed("skipped", "compiling took over 15 s")
        return results

    monkeypatch.setattr(ChoiceMeasuring, "measure", measure_but_slow)
    with settings.override(search_budget=len(SPACE), search_patience=4.0):
        add(kernel)
    assert seen and all(p == Patience(4.0) for p in seen)
    record = kernel.last_tuning
    assert record is not None and record.results[slow].status == "skipped" and record.best != slow
    stored = {candidate for rows in store._rows.values() for candidate in rows}
    assert slow.digest not in stored and len(stored) == len(SPACE) - 1

    monkeypatch.setattr(
        ChoiceMeasuring, "measure", lambda *a, **k: seen.append(_patience.get()) or measure(*a, **k)
    )
    add(kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel))
    assert seen[-1] is None  # exhaustive tuning waits for every compile


def test_the_autotune_table_says_which_search_ran_and_how_much_of_the_space_it_evaluated() -> None:
    from rich.console import Console

    kernel = kernelpick.autotune(SPACE, key=["n"], search="random", store=MemoryStore())(add_kernel)
    with settings.override(search_budget=4):
        add(kernel)
    assert kernel.last_tuning is not None
    terminal = Console(width=200)
    with terminal.capture() as captured:
        terminal.print(kernel.last_tuning.table())
    text = " ".join(captured.get().split())
    assert f"random search: 4 of {len(SPACE)} configs evaluated (4 timed now, " in text
    assert "stopped: evaluations)" in text


def batch_sizes(trace: SearchTrace) -> list[int]:
    """How many configs each batch of a search timed (a batch's evaluations share their second)."""
    return [len(list(batch)) for _, batch in groupby(e.seconds_at for e in trace.evaluations)]


def test_options_in_search_reach_the_strategy_and_name_it_in_the_trace_and_the_table() -> None:
    from rich.console import Console

    kernel = kernelpick.autotune(
        SPACE, key=["n"], search="random(batch_size=3, budget=6)", store=MemoryStore()
    )(add_kernel)
    with settings.override(search_budget=2):  # the option, not the setting, is this search's budget
        add(kernel)
    record = kernel.last_tuning
    assert record is not None and record.search is not None
    assert record.search.strategy == "random(budget=6, batch_size=3)"
    assert record.search.used == 6 and batch_sizes(record.search) == [3, 3]
    terminal = Console(width=200)
    with terminal.capture() as captured:
        terminal.print(record.table())
    assert f"random(budget=6, batch_size=3) search: 6 of {len(SPACE)} configs evaluated" in captured.get()


def test_a_wrong_option_is_refused_when_the_kernel_is_decorated() -> None:
    with pytest.raises(ConfigError, match="search strategy 'random' has no option 'size'") as raised:
        kernelpick.autotune(SPACE, key=["n"], search="random(size=3)")(add_kernel)
    assert str(raised.value).endswith("its options are budget, seconds, seed, batch_size")
    with pytest.raises(ConfigError, match="option 'batch_size' of search strategy 'random' takes an int"):
        kernelpick.Selector("double", [extern(double)], search={"name": "random", "batch_size": "3"})


def test_a_selector_takes_its_search_as_a_mapping_and_each_space_is_searched_with_the_options() -> None:
    selector = kernelpick.Selector(
        "double",
        [extern(double), template(DOUBLE, configs=CONFIGS)],
        search={"name": "random", "batch_size": 2, "budget": 4},
        store=MemoryStore(),
    )
    x = torch.randn(300)
    with settings.override(rep_ms=1.0, confirm_top=2):
        assert torch.equal(selector(x), x * 2)
    record = selector.last_selection
    assert record is not None
    trace = record.searches["double"]
    assert trace.strategy == "random(budget=4, batch_size=2)"
    assert trace.used == 4 and batch_sizes(trace) == [2, 2]


def test_kernelpick_search_takes_options_as_search_does() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    with settings.override(search="Random(batch_size=3, budget=6)"):  # converted as the variable is
        add(kernel)
    record = kernel.last_tuning
    assert record is not None and record.search is not None
    assert record.search.strategy == "random(budget=6, batch_size=3)" and record.search.used == 6
    with settings.override(search="random(size=3)"):
        with pytest.raises(ConfigError, match=r"KERNELPICK_SEARCH='random\(size=3\)': .*no option 'size'"):
            default_strategy_name()
    with pytest.raises(SettingsError, match="KERNELPICK_SEARCH='randm' is not one of"):
        with settings.override(search="randm(budget=6)"):
            pass
