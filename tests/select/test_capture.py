"""A selection met first while a CUDA graph is captured: measured in workers (nothing runs in this
process), or, where the workers cannot measure it, it says to warm up; a stored pick serves.

There is no capture on the CPU: `capturing`, which asks torch whether the current stream captures,
answers True here as it would inside `torch.cuda.graph(...)` for CUDA inputs.
"""

from __future__ import annotations

import threading

import pytest
import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick import Selector, TuningInCapture, TuningRequired, extern
from kernelpick.device import capturing
from kernelpick.engine import choice_measuring
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
    with pytest.raises(  # on the CPU isolation is off unless asked for
        TuningInCapture,
        match=r"`captured_add` met .* CUDA graph .*\(isolation is off\).* before capturing",
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


def _not_here(*args: object, **kwargs: object) -> None:
    raise AssertionError("a choice ran in this process during the capture")


def test_a_new_signature_inside_a_capture_is_measured_in_workers_and_skips_what_cannot_cross(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock = threading.Lock()

    def add_under_a_lock(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with lock:
            return a + b

    store = MemoryStore()
    selector = Selector(
        "captured_in_workers",
        [extern(torch.add, name="torch.add"), extern(add_under_a_lock, name="locked add")],
        store=store,
        isolate=True,
    )
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: True)
    monkeypatch.setattr(choice_measuring.ChoiceMeasuring, "_here", _not_here)
    x = torch.randn(16)
    torch.testing.assert_close(selector(x, x), x + x)  # the graph would record the pick
    statuses = {row.name: row.result.status for row in selector.last_selection.candidates}
    assert statuses == {"torch.add": "ok", "locked add": "skipped"}
    [locked] = [row for row in selector.last_selection.candidates if row.name == "locked add"]
    assert "CUDA graph" in locked.result.message and "lock" in locked.result.message
    assert selector.last_selection.best == "torch.add" and store.picks


def test_a_capture_whose_choices_no_worker_can_measure_raises_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    selector = Selector(
        "captured_timer",
        [extern(torch.add), extern(add)],
        store=MemoryStore(),
        isolate=True,
    )
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: True)
    monkeypatch.setattr(choice_measuring.ChoiceMeasuring, "_here", _not_here)
    monkeypatch.setattr(
        choice_measuring.ChoiceMeasuring,
        "_in_workers",
        lambda *args: (_ for _ in ()).throw(choice_measuring.IsolationError("no worker starts")),
    )
    x = torch.randn(16)
    with pytest.raises(
        TuningInCapture, match=r"cannot measure its candidates in workers \(no worker starts\)"
    ):
        selector(x, x)


@triton.jit
def _twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def test_an_autotuned_kernels_first_call_inside_a_capture_is_measured_in_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = kernelpick.autotune(
        [triton.Config({"BLOCK": b}) for b in (32, 64)], key=["n"], store=MemoryStore(), isolate=True
    )(_twice)
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: True)
    monkeypatch.setattr(choice_measuring.ChoiceMeasuring, "_here", _not_here)
    x, out = torch.randn(100), torch.empty(100)
    kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
    torch.testing.assert_close(out, 2 * x)
    assert {r.status for r in kernel.last_tuning.results.values()} == {"ok"}


def test_an_autotuned_kernel_whose_hooks_run_here_raises_inside_a_capture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def hook(args: dict[str, object]) -> None:
        pass

    kernel = kernelpick.autotune(
        [triton.Config({"BLOCK": b}, pre_hook=hook) for b in (32, 64)],
        key=["n"],
        store=MemoryStore(),
        isolate=True,
    )(_twice)
    monkeypatch.setattr(choice_measuring, "capturing", lambda values: True)
    monkeypatch.setattr(choice_measuring.ChoiceMeasuring, "_here", _not_here)
    x, out = torch.randn(100), torch.empty(100)
    with pytest.raises(
        TuningInCapture, match=r"`_twice` met .* cannot measure its candidates in workers \(.*hook"
    ):
        kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
