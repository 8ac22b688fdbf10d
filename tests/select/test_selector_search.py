"""Tests of Selector(search=...): config spaces searched by a strategy, externs always timed, the
final round, stores that start searches warm, and the search in the record, the table and the log."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
from tests.select.search_choices import CONFIGS, DOUBLE, ISOLATED, double, halve_then_double, slow_double
from tests.tune.kernels import add_kernel

from kernelpick import Config, Selector, extern, processed, settings, template, triton_choice
from kernelpick.console import console
from kernelpick.engine.choice import Choice
from kernelpick.engine.choice_measuring import ChoiceMeasuring
from kernelpick.errors import ConfigError
from kernelpick.reports.data import load_report
from kernelpick.store import SQLiteStore
from kernelpick.store.default import default_store_path


def selector(search: str | None = None, **options: Any) -> Selector:
    return Selector("double", [extern(double), template(DOUBLE, configs=CONFIGS)], search=search, **options)


@pytest.fixture
def timed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The names of the choices each measurement in this process timed, call by call."""
    calls: list[list[str]] = []
    measure_here = ChoiceMeasuring._here

    def recording(self: ChoiceMeasuring, todo: list[Choice], *args: Any, **kwargs: Any) -> Any:
        calls.append([c.name for c in todo])
        return measure_here(self, todo, *args, **kwargs)

    monkeypatch.setattr(ChoiceMeasuring, "_here", recording)
    yield calls


@pytest.fixture(autouse=True)
def small_budgets() -> Iterator[None]:
    """Brief timings, a budget of 6 configs of the 16 and two finalists per searched space."""
    with settings.override(rep_ms=1.0, search_budget=6, search_seed=3, confirm_top=2):
        yield


def test_a_search_times_fewer_choices_and_still_picks_a_verified_one(timed: list[list[str]]) -> None:
    choices = [extern(slow_double), template(DOUBLE, configs=CONFIGS)]
    searched = Selector("double", choices, search="random")
    x = torch.randn(300)
    assert torch.equal(searched(x), x * 2)
    record = searched.last_selection
    assert record is not None
    trace = record.searches["double"]
    assert trace.strategy == "random" and trace.used == 6 and trace.stopped == "evaluations"
    assert len(record.results) == 1 + 6  # the extern and what the search evaluated, not all 16
    statuses = {r.name: r.result.status for r in record.candidates}
    assert list(statuses.values()).count("wrong_result") >= 2  # verified while searching
    assert record.best.startswith("double BLOCK=") and "SHIFT=0.0" in record.best
    assert [len(call) for call in timed] == [6, 1 + 2]  # the search's batch, then the final round

    timed.clear()
    everything = Selector("double", choices, search="exhaustive")  # the same store: ten left to time
    everything.tune(x)
    assert everything.last_selection is not None and not everything.last_selection.searches
    assert len(everything.last_selection.results) == 1 + len(CONFIGS)
    assert sum(len(call) for call in timed) == len(CONFIGS) - 6


def test_externs_and_single_choices_are_timed_in_the_final_round_with_each_spaces_best(
    timed: list[list[str]],
) -> None:
    one_config = triton_choice(
        add_kernel,
        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        configs=[Config({"BLOCK": 64})],
        bind=lambda x: ((x, x, out := torch.empty_like(x), x.numel()), out),
        name="add_self",
    )
    choices = [extern(double), extern(halve_then_double), template(DOUBLE, configs=CONFIGS), one_config]
    searched = Selector("double", choices, search="random")
    x = torch.randn(300)
    assert torch.equal(searched(x), x * 2)
    record = searched.last_selection
    assert record is not None and set(record.searches) == {"double"}
    names = {r.name for r in record.candidates}
    assert {"double", "halve_then_double", "add_self BLOCK=64, num_warps=4, num_stages=3"} <= names
    assert record.reference == "double"
    search_batches, final = timed[:-1], timed[-1]
    assert all("halve_then_double" not in batch for batch in search_batches)  # never part of a search
    best_two = sorted(
        (r for r in record.candidates if r.name.startswith("double ") and r.result.ok),
        key=lambda r: r.result.cost_ms,
    )[:2]
    assert final[:3] == ["double", "halve_then_double", "add_self BLOCK=64, num_warps=4, num_stages=3"]
    assert sorted(final[3:]) == sorted(r.name for r in best_two)  # the best two, timed again beside them


def test_a_second_selector_on_the_same_sqlite_file_starts_warm(timed: list[list[str]]) -> None:
    x = torch.randn(500)
    first = selector("random", store=SQLiteStore(default_store_path()))
    first.tune(x)
    timed_first = {name for call in timed for name in call}
    assert first.last_selection is not None and len(timed_first) == 1 + 6

    timed.clear()
    with settings.override(search_seed=4):  # another seed: the search carries on, six more
        second = selector("random", store=SQLiteStore(default_store_path()))
        assert torch.equal(second(x), x * 2)
    record = second.last_selection
    assert record is not None
    trace = record.searches["double"]
    known = [e for e in trace.evaluations if e.seconds_at == 0.0 and e.result.from_store]
    assert len(known) == 6 and trace.used == 6
    timed_second = {name for call in timed for name in call}
    assert timed_second and not timed_second & timed_first  # nothing stored was timed again
    assert len(record.results) == 1 + 12
    assert "random search of double: 12 of 16 configs evaluated (6 timed now" in record.search_caption(
        "double"
    )


def test_an_unknown_strategy_is_refused_when_the_selector_is_made() -> None:
    with pytest.raises(
        ConfigError, match="unknown search strategy 'annealing': expected one of exhaustive, random, halving"
    ):
        selector("annealing")


def test_without_search_every_choice_is_timed_at_once_unless_kernelpick_search_says(
    timed: list[list[str]],
) -> None:
    selector().tune(torch.randn(200))
    assert [len(call) for call in timed] == [1 + len(CONFIGS)]  # one measurement of every choice

    timed.clear()
    with settings.override(search="halving", search_budget=0):
        by_setting = selector()
        by_setting.tune(torch.randn(201))
    assert by_setting.last_selection is not None
    assert by_setting.last_selection.searches["double"].strategy == "halving"
    with settings.override(search="random"):
        named = selector("exhaustive")  # search= wins over the setting
        named.tune(torch.randn(202))
    assert named.last_selection is not None and not named.last_selection.searches
    assert len(named.last_selection.results) == 1 + len(CONFIGS)


def test_triton_choice_and_processed_template_spaces_are_searched_apart() -> None:
    def contiguous(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (x.contiguous(),)

    adds = triton_choice(
        add_kernel,
        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        configs=[Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256) for w in (1, 2, 4)],
        bind=lambda x: ((x, x, out := torch.empty_like(x), x.numel()), out),
        name="add_self",
    )
    choices = [extern(double), adds, processed(template(DOUBLE, configs=CONFIGS), before=contiguous)]
    searched = Selector("double", choices, search="pattern")
    x = torch.randn(400)
    assert torch.equal(searched(x), x * 2)
    record = searched.last_selection
    assert record is not None
    assert set(record.searches) == {"add_self", "double [before: contiguous]"}
    assert {name: trace.candidates for name, trace in record.searches.items()} == {
        "add_self": 12,
        "double [before: contiguous]": 16,
    }
    assert all(trace.strategy == "pattern" and trace.used <= 6 for trace in record.searches.values())
    assert len(record.results) < 1 + 12 + 16


def test_the_record_the_table_and_the_log_hold_each_search(tmp_path: Path) -> None:
    log = tmp_path / "tuning.jsonl"
    with settings.override(log_path=log):
        searched = selector("random")
        searched.tune(torch.randn(600))
    record = searched.last_selection
    assert record is not None
    data = record.to_dict()["searches"]["double"]
    assert data["strategy"] == "random" and data["configs"] == 16 and data["used"] == 6
    assert len(data["evaluations"]) == 6 and data["curve"]

    terminal = console()
    with terminal.capture() as captured:
        terminal.print(record.table())
    text = " ".join(captured.get().split())
    assert "random search of double: 6 of 16 configs evaluated (6 timed now, " in text

    (line,) = [json.loads(text) for text in log.read_text().splitlines()]
    assert line["kind"] == "select" and line["searches"]["double"]["used"] == 6
    (tuned,) = load_report(log).keys
    (trace,) = tuned.searches
    assert trace.strategy == "random of double" and len(trace.costs) == 6 and trace.timed


def test_a_reference_config_is_timed_apart_from_the_search_of_its_space() -> None:
    choices = [template(DOUBLE, configs=CONFIGS, name="doubled")]
    searched = Selector("double", choices, reference="doubled", search="random")
    x = torch.randn(300)
    assert torch.equal(searched(x), x * 2)
    record = searched.last_selection
    assert record is not None and {n: t.candidates for n, t in record.searches.items()} == {"doubled": 15}
    first = "doubled BLOCK=32, SHIFT=0.0, num_warps=1, num_stages=3"  # what runs unless clearly beaten
    assert record[first].result.ok and record.reference == first
    assert all(e.config != CONFIGS[0] for e in record.searches["doubled"].evaluations)


def test_a_search_measures_in_worker_processes_when_isolated(
    caplog: pytest.LogCaptureFixture, timed: list[list[str]]
) -> None:
    x = torch.randn(700)
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        assert torch.equal(ISOLATED(x), x * 2)
    assert "not in workers" not in caplog.text and not timed  # measured in worker processes only
    record = ISOLATED.last_selection
    assert record is not None and record.searches["double"].used == 6
    assert len(record.results) == 1 + 6 and record["slow_double"].result.ok
    assert "SHIFT=0.0" in record.best
