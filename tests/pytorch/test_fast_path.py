"""Which eager calls may skip PyTorch's dispatcher."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelpick.pytorch.fast_path import DIRECT, DISPATCH, INTERPRET, route


def test_plain_cpu_tensors_run_directly_in_the_interpreter() -> None:
    x = torch.ones(2)
    assert route((x, 3, [x, x]), {"y": x}, True) == INTERPRET
    assert route((1, "a"), {}, True) == DIRECT


def test_autograd_subclasses_and_other_devices_go_through_the_dispatcher() -> None:
    leaf = torch.ones(2, requires_grad=True)
    assert route((leaf,), {}, True) == DISPATCH
    assert route((leaf,), {}, False) == INTERPRET, "no graph is recorded when grad mode is off"
    assert route((torch.ones(1),), {"w": [leaf]}, True) == DISPATCH
    assert route((torch.ones(1, device="meta"),), {}, True) == DISPATCH
    with FakeTensorMode():
        fake = torch.ones(2)
    assert route((fake,), {}, False) == DISPATCH
    assert route((torch.nn.Parameter(torch.ones(1)),), {}, False) == INTERPRET
