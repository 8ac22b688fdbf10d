"""`torch.ops.<namespace>.<name>` of a `kernelpick.op` before its registration: a clear error, not a bare AttributeError."""

from __future__ import annotations

import pytest
import torch

import kernelpick
from kernelpick.errors import OperatorError, OperatorNotRegistered
from tests.pytorch.kernels import BLOCK, blocks, increment_kernel


def increment(x: torch.Tensor) -> None:
    increment_kernel[blocks(x.numel())](x, x.numel(), BLOCK=BLOCK)


def test_torch_ops_says_the_op_is_not_registered_yet_and_what_to_do() -> None:
    op = kernelpick.op("kp_test_pending::increment_", increment)
    with pytest.raises(OperatorNotRegistered, match="not registered yet") as raised:
        torch.ops.kp_test_pending.increment_  # noqa: B018
    assert isinstance(raised.value, OperatorError) and isinstance(raised.value, AttributeError)
    assert "torch.ops.kp_test_pending.increment_ does not exist yet" in str(raised.value)
    assert "example_inputs=" in str(raised.value)
    assert not hasattr(torch.ops.kp_test_pending, "increment_")  # hasattr and getattr defaults still work
    with pytest.raises(AttributeError, match="no attribute 'other'") as other:
        torch.ops.kp_test_pending.other  # noqa: B018
    assert not isinstance(other.value, OperatorNotRegistered)  # names of no kernelpick op: PyTorch's error

    x = torch.zeros(8)
    op(x)
    torch.ops.kp_test_pending.increment_(x)
    assert torch.equal(x, torch.full((8,), 2.0))


def test_an_op_with_example_inputs_is_in_torch_ops_at_once() -> None:
    kernelpick.op("kp_test_pending::increment_now_", increment, example_inputs=(torch.zeros(4),))
    x = torch.zeros(4)
    torch.ops.kp_test_pending.increment_now_(x)
    assert torch.equal(x, torch.ones(4))
