"""What issue 39 made one stays one: a worker serves one kind of request, whichever front sends it."""

from __future__ import annotations

import typing
from typing import Any

import pytest
import torch
import triton

import kernelpick
from kernelpick.bench.inputs import Example
from kernelpick.bench.measure import Measurement
from kernelpick.errors import IsolationError
from kernelpick.select import choice_measuring
from kernelpick.store import MemoryStore
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
    monkeypatch.setattr(choice_measuring, "start_workers_for", lambda device: None)
    monkeypatch.setattr(choice_measuring, "measure_in_workers", worker_then_here)
    space = [triton.Config({"BLOCK": block}) for block in (32, 64)]
    tuned = kernelpick.autotune(space, key=["n"], store=MemoryStore(), isolate=True)(increment_kernel)
    x = torch.zeros(100)
    tuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, 100)
    assert torch.equal(x, torch.ones(100))  # in place, once
    selector = kernelpick.Selector("add", [kernelpick.extern(torch.add)], store=MemoryStore(), isolate=True)
    torch.testing.assert_close(selector(x, x), x + x)
    assert built == [("worker", Example), ("here", Example)] * 2
