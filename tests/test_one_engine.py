"""What issue 39 made one stays one: one search and one measurer for both fronts, and a worker serving one
kind of request, whichever front sends it."""

from __future__ import annotations

import typing
from typing import Any

import pytest
import torch
import triton

import kernelpick
from kernelpick.bench.inputs import Example
from kernelpick.bench.measure import Measurement
from kernelpick.engine import choice_measuring
from kernelpick.engine.choice import ExternChoice
from kernelpick.engine.triton_choice import ConfigChoice
from kernelpick.errors import IsolationError
from kernelpick.select.template_choice import TemplateChoice
from kernelpick.store import MemoryStore
from kernelpick.workers.pool import WorkerPool
from kernelpick.workers.request import Problem, _WorkerProblem
from tests.tune.kernels import increment_kernel


def test_a_problem_has_no_field_that_selects_a_kind_of_example() -> None:
    hints = typing.get_type_hints(Problem)
    assert "inputs" in hints and "keeping" in hints  # the hints are read
    kinds = [name for name, hint in hints.items() if typing.get_origin(hint) is typing.Literal]
    assert not kinds, f"Problem fields that select between kinds of request: {kinds}"


def test_both_fronts_measure_on_one_example_class_here_and_in_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[tuple[str, type]] = []  # (where, the example's class) per measurement
    where = ["here"]
    measurement_init = Measurement.__init__

    def spy(self: Measurement, example: Any, *args: Any, **kwargs: Any) -> None:
        built.append((where[0], type(example)))
        measurement_init(self, example, *args, **kwargs)

    def worker_then_here(problem: Problem, *args: Any, **kwargs: Any) -> Any:
        where[0] = "worker"
        try:
            _WorkerProblem(Problem.from_data(problem.to_data()))  # what a worker makes of the request
        finally:
            where[0] = "here"
        raise IsolationError("measured here instead")  # the front measures in this process then

    monkeypatch.setattr(Measurement, "__init__", spy)
    monkeypatch.setattr(WorkerPool, "start_soon", lambda self: None)
    monkeypatch.setattr(choice_measuring, "measure_in_workers", worker_then_here)
    space = [triton.Config({"BLOCK": block}) for block in (32, 64)]
    tuned = kernelpick.autotune(space, key=["n"], store=MemoryStore(), isolate=True)(increment_kernel)
    x = torch.zeros(100)
    tuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)
    assert torch.equal(x, torch.ones(100))  # in place, once
    selector = kernelpick.Selector("add", [kernelpick.extern(torch.add)], store=MemoryStore(), isolate=True)
    torch.testing.assert_close(selector(x, x), x + x)
    assert built == [("worker", Example), ("here", Example)] * 2


def test_both_fronts_search_and_measure_through_the_engines_one_search_and_one_measurer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelpick import settings, template
    from kernelpick.engine import searching, tuning
    from tests.select.search_choices import CONFIGS, DOUBLE, double

    searched: list[list[type]] = []  # the candidates' kinds, per search
    measured: list[list[type]] = []  # the candidates' kinds, per measurement
    search, measure = searching.search_choices, choice_measuring.ChoiceMeasuring.measure

    def search_spy(strategy: str, choices: Any, *args: Any, **kwargs: Any) -> Any:
        searched.append(sorted({type(c) for c in choices}, key=lambda t: t.__name__))
        return search(strategy, choices, *args, **kwargs)

    def measure_spy(self: Any, todo: Any, *args: Any, **kwargs: Any) -> Any:
        measured.append(sorted({type(c) for c in todo}, key=lambda t: t.__name__))
        return measure(self, todo, *args, **kwargs)

    monkeypatch.setattr(tuning, "search_choices", search_spy)
    monkeypatch.setattr(choice_measuring.ChoiceMeasuring, "measure", measure_spy)
    space = [triton.Config({"BLOCK": block}) for block in (16, 32, 64, 128)]
    tuned = kernelpick.autotune(space, key=["n"], store=MemoryStore(), search="random")(increment_kernel)
    choices = [kernelpick.extern(double), template(DOUBLE, configs=CONFIGS)]
    selector = kernelpick.Selector("double", choices, search="random", store=MemoryStore())
    x = torch.zeros(100)
    with settings.override(rep_ms=1.0, search_budget=2, confirm_top=1):
        tuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)
        torch.testing.assert_close(selector(x + 1), (x + 1) * 2)
    assert searched == [[ConfigChoice], [ExternChoice, TemplateChoice]]  # each front's one search
    assert {kind for kinds in measured for kind in kinds} == {ConfigChoice, ExternChoice, TemplateChoice}
    assert tuned.last_tuning is not None and tuned.last_tuning.search is not None
    assert selector.last_selection is not None and "double" in selector.last_selection.searches


def test_the_engine_calls_neither_front_back() -> None:
    """A cold call of each front runs key, store, claim, compile, verify, measure, pick and store through the
    engine without the engine (or what it calls) entering a front's module again: what a front gives it
    (the reference, the options) is data, not a callback."""
    import sys

    fronts = ("kernelpick.select.selector", "kernelpick.select.background", "kernelpick.tune.")
    engine = ("kernelpick.engine.", "kernelpick.bench.", "kernelpick.workers.", "kernelpick.compile.")
    engine += ("kernelpick.store.", "kernelpick.search.")
    called_back: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_globals.get("__name__", "").startswith(fronts):
            return
        below = frame.f_back
        while below is not None:
            if below.f_globals.get("__name__", "").startswith(engine):
                called_back.append(f"{frame.f_code.co_qualname} from {below.f_code.co_qualname}")
                return
            below = below.f_back

    space = [triton.Config({"BLOCK": block}) for block in (32, 64)]
    tuned = kernelpick.autotune(space, key=["n"], store=MemoryStore(), isolate=False)(increment_kernel)
    selector = kernelpick.Selector(
        "add",
        [kernelpick.extern(torch.add), kernelpick.extern(lambda a, b: b + a, name="plus")],
        store=MemoryStore(),
    )
    x = torch.zeros(100)
    sys.setprofile(profile)
    try:
        tuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)
        added = selector(x, x)
    finally:
        sys.setprofile(None)
    assert torch.equal(x, torch.ones(100)) and torch.equal(added, x + x)
    assert selector.last_selection is not None and selector.last_selection.reference == "torch.add"
    assert not called_back
