"""The worker's side of an isolated selection, run here: what it keeps between requests of one problem."""

from __future__ import annotations

from pathlib import Path

import torch

import kernelpick
from kernelpick.select.isolated import measure_in_worker
from kernelpick.select.signature import Signature
from kernelpick.workers.problems import describe_value

REFERENCE_CALLS: list[int] = []


def counted_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    REFERENCE_CALLS.append(1)
    return a + b


def test_the_reference_runs_once_per_problem_not_once_per_candidate(tmp_path: Path) -> None:
    selector = kernelpick.Selector(
        "counted", [kernelpick.extern(counted_add), kernelpick.extern(torch.add, name="torch.add")]
    )
    a, b = torch.randn(64), torch.randn(64)
    problem = {"inputs": [describe_value(a, tmp_path), describe_value(b, tmp_path)], "kwargs": {}}
    [torch_add] = [c.digest for c in selector.expand(Signature.of((a, b), {})) if c.name == "torch.add"]
    REFERENCE_CALLS.clear()
    for _ in range(3):  # consecutive requests of one problem, as the pool sends them
        request = {"device": "cpu", "problem": problem, "candidates": [torch_add], "step": "screen"}
        assert measure_in_worker(selector, request)[torch_add]["status"] == "ok"
    assert len(REFERENCE_CALLS) == 1  # the expected output is made once and checked against thrice
