"""A selection met first while a CUDA graph is captured: it says to warm up; a stored pick serves.

There is no capture on the CPU: `capturing`, which asks torch whether the current stream captures,
answers True here as it would inside `torch.cuda.graph(...)` for CUDA inputs.
"""

from __future__ import annotations

import pytest
import torch

import kernelpick
from kernelpick import Selector, TuningInCapture, TuningRequired, extern
from kernelpick.device import capturing
from kernelpick.select import choice_measuring
from kernelpick.store import MemoryStore


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def test_a_new_signature_inside_a_capture_raises_saying_what_to_do_and_measures_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    selector = Selector("captured_add", [extern(torch.add), extern(add)], store=store)
    x = torch.randn(16)
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: True)
    with pytest.raises(
        TuningInCapture, match=r"selector `captured_add` met .* CUDA graph .* before capturing"
    ):
        selector(x, x)
    assert isinstance(TuningInCapture("x"), TuningRequired)  # caught where tuning is forbidden, too
    assert not store.picks and not selector.records  # nothing measured, nothing stored
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: False)
    torch.testing.assert_close(selector(x, x), x + x)  # the warm-up, outside the capture
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: True)
    torch.testing.assert_close(selector(x, x), x + x)  # in the capture: the hot path
    assert store.picks
    selector.clear()
    torch.testing.assert_close(selector(x, x), x + x)  # a stored pick: nothing to measure


def test_only_cuda_inputs_can_be_captured() -> None:
    assert not capturing([torch.randn(4), 3, None])
    assert kernelpick.TuningInCapture is TuningInCapture
