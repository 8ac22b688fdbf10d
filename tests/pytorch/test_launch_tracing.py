"""Recording one call on fake tensors: launches noted, nothing run, inputs' metadata kept, torch writes seen."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from kernelpick.errors import OperatorError
from kernelpick.pytorch.launch_tracing import concrete, record_call
from tests.pytorch.kernels import BLOCK, add_kernel, blocks, increment_kernel


def add_then_increment(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[blocks(x.numel())](x, y, out, x.numel(), BLOCK=BLOCK)
    increment_kernel[blocks(x.numel())](x, x.numel(), BLOCK=BLOCK)
    return out


def test_launches_are_recorded_on_fake_copies_and_nothing_runs() -> None:
    x, y = torch.zeros(8), torch.ones(8)
    recorded = record_call(add_then_increment, {"x": x, "y": y}, ("x", "y"))
    assert [launch.kernel for launch in recorded.launches] == [add_kernel, increment_kernel]
    fake_x = recorded.inputs["x"]
    assert isinstance(fake_x, FakeTensor) and fake_x.shape == x.shape
    assert recorded.launches[1].args[0] is fake_x
    assert isinstance(recorded.output, FakeTensor)
    assert torch.equal(x, torch.zeros(8)), "recording must not run a kernel"
    assert recorded.written_by_torch() == ()


def test_inputs_keep_strides_and_inputs_passed_twice_stay_one_tensor() -> None:
    base = torch.zeros(4, 6)
    view = base.t()[1:]
    recorded = record_call(lambda a, b: None, {"a": view, "b": view}, ("a", "b"))
    assert recorded.inputs["a"] is recorded.inputs["b"]
    assert recorded.inputs["a"].stride() == view.stride() and recorded.inputs["a"].shape == view.shape


def test_inputs_that_are_already_fake_or_meta_are_accepted() -> None:
    with FakeTensorMode():
        fake = torch.empty(3, 5).t()
    meta = torch.empty(2, 2, device="meta")
    recorded = record_call(lambda a, b: a.sum() + b.sum(), {"a": fake, "b": meta}, ("a", "b"))
    assert recorded.inputs["a"].stride() == (1, 5)
    assert recorded.inputs["b"].device.type == "meta"


def test_pytorch_in_place_writes_of_inputs_show_in_version_counters() -> None:
    def scale_(x: torch.Tensor, y: torch.Tensor) -> None:
        x[1:].mul_(2)

    recorded = record_call(scale_, {"x": torch.ones(4), "y": torch.ones(4)}, ("x", "y"))
    assert recorded.written_by_torch() == ("x",)


def test_functions_that_need_data_fail_with_advice() -> None:
    def reads_data(x: torch.Tensor) -> torch.Tensor:
        return x * x.sum().item()

    with pytest.raises(OperatorError, match=r"failed when run on fake tensors.*register_fake"):
        record_call(reads_data, {"x": torch.ones(2)}, ("x",))


def test_symbolic_numbers_become_their_hints() -> None:
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.DYNAMIC])
    symbolic = mode.from_tensor(torch.ones(7, 3), symbolic_context=dynamic)
    assert concrete(5) == 5
    size = symbolic.shape[0]
    assert isinstance(size, torch.SymInt) and concrete(size) == 7
    recorded = record_call(lambda x: None, {"x": symbolic}, ("x",))
    assert tuple(recorded.inputs["x"].shape) == (7, 3)
