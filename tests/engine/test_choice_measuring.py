"""engine/choice_measuring.py: the one measurer of both fronts, an autotuned kernel's configs and a selector's choices."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
import triton

import kernelpick
from kernelpick.engine.choice_measuring import ChoiceMeasuring
from kernelpick.store import MemoryStore
from tests.tune.kernels import add_kernel


def test_both_fronts_measure_through_the_one_measurer(monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[list[str]] = []
    measure = ChoiceMeasuring.measure

    def spy(self: ChoiceMeasuring, todo: Any, *args: Any) -> Any:
        measured.append([type(choice).__name__ for choice in todo])
        return measure(self, todo, *args)

    monkeypatch.setattr(ChoiceMeasuring, "measure", spy)
    space = [triton.Config({"BLOCK": block}) for block in (32, 64)]
    tuned = kernelpick.autotune(space, key=["n"], store=MemoryStore())(add_kernel)
    x, out = torch.randn(100), torch.empty(100)
    tuned[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, x, out, 100)
    torch.testing.assert_close(out, x + x)
    selector = kernelpick.Selector("add", [kernelpick.extern(torch.add)], store=MemoryStore())
    torch.testing.assert_close(selector(x, x), x + x)
    assert measured == [["ConfigChoice", "ConfigChoice"], ["ExternChoice"]]
    assert importlib.util.find_spec("kernelpick.select.kernel_configs") is None  # merged away
