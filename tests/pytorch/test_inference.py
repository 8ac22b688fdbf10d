"""From recorded launches to written inputs: direct writes, writes through views, scratch ignored, explicit checks."""

from __future__ import annotations

import logging

import pytest
import torch

from kernelpick.errors import MutatesArgsError, OperatorError
from kernelpick.pytorch.inference import (
    Inference,
    InputWrite,
    certain_or_warn,
    check_declared,
    check_outputs,
    infer_mutations,
)
from kernelpick.pytorch.launch_tracing import record_call
from tests.pytorch.kernels import BLOCK, add_kernel, blocks, impure_asm_kernel, increment_kernel


def infer(fn, **inputs):  # type: ignore[no-untyped-def]
    return infer_mutations(record_call(fn, inputs, tuple(inputs)), tuple(inputs))


def test_an_input_the_kernel_writes_is_mutated_and_read_inputs_are_not() -> None:
    def add_into(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        add_kernel[blocks(8)](x, y, out, 8, BLOCK=BLOCK)

    found = infer(add_into, x=torch.ones(8), y=torch.ones(8), out=torch.empty(8))
    assert found.mutated == ("out",) and found.certain
    assert found.writes == (InputWrite("out", "add_kernel", "out_ptr"),)
    assert found.kernels == ("add_kernel",)


def test_a_write_through_a_view_marks_the_input() -> None:
    def increment_column(x: torch.Tensor, y: torch.Tensor) -> None:
        column = x[:, 2].contiguous()  # a copy: writing it does not touch x
        increment_kernel[(1,)](column, column.numel(), BLOCK=BLOCK)
        row = y[1]
        increment_kernel[(1,)](row, row.numel(), BLOCK=BLOCK)

    found = infer(increment_column, x=torch.zeros(3, 4), y=torch.zeros(3, 4))
    assert found.mutated == ("y",)
    assert found.writes == (InputWrite("y", "increment_kernel", "x_ptr", through_view=True),)
    assert found.why("y") == "kernel `increment_kernel` writes a view of `y` through its parameter `x_ptr`"


def test_tensors_the_function_allocates_are_not_inputs() -> None:
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        scratch, out = torch.empty_like(x), torch.empty_like(x)
        add_kernel[blocks(8)](x, y, scratch, 8, BLOCK=BLOCK)
        add_kernel[blocks(8)](scratch, y, out, 8, BLOCK=BLOCK)
        return out

    found = infer(add, x=torch.ones(8), y=torch.ones(8))
    assert found.mutated == () and found.writes == () and found.kernels == ("add_kernel",)


def test_pytorch_in_place_writes_count_too() -> None:
    def fill(x: torch.Tensor, y: torch.Tensor) -> None:
        y.zero_()

    found = infer(fill, x=torch.ones(2), y=torch.ones(2))
    assert found.mutated == ("y",) and found.why("y").startswith("`y` is written by a PyTorch")


def test_an_unsure_analysis_counts_every_tensor_it_was_given(caplog: pytest.LogCaptureFixture) -> None:
    def copy(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> None:
        impure_asm_kernel[(1,)](x, y, z, BLOCK=BLOCK)

    found = infer(copy, x=torch.ones(BLOCK), y=torch.ones(BLOCK), z=torch.ones(BLOCK))
    assert found.mutated == ("x", "y", "z") and not found.certain
    assert "impure_asm_kernel" in found.reason and "pure" in found.reason
    with caplog.at_level(logging.WARNING, logger="kernelpick.pytorch"):
        certain_or_warn("t::copy", found)
    assert "unsure" in caplog.text and "t::copy" in caplog.text


WRITES_OUT = Inference(("out",), (InputWrite("out", "add_kernel", "out_ptr"),), ("add_kernel",))


def test_an_undeclared_write_names_the_argument_and_the_kernel() -> None:
    with pytest.raises(MutatesArgsError) as error:
        check_declared("t::add", (), WRITES_OUT, ("x", "out"))
    message = str(error.value)
    assert "`out` is written but not declared" in message
    assert "kernel `add_kernel` writes `out` through its parameter `out_ptr`" in message


def test_a_declared_write_nothing_makes_is_an_error_when_the_analysis_is_sure() -> None:
    with pytest.raises(
        MutatesArgsError, match=r"`x` is declared but nothing writes it \(kernels launched: `add_kernel`\)"
    ):
        check_declared("t::add", ("x", "out"), WRITES_OUT, ("x", "out"))
    unsure = Inference(("x", "out"), WRITES_OUT.writes, ("add_kernel",), certain=False, reason="r")
    check_declared("t::add", ("out",), unsure, ("x", "out"))  # trusted where the analysis is unsure


def test_declared_names_must_be_tensor_parameters() -> None:
    with pytest.raises(MutatesArgsError, match=r"`n`, which is not a tensor parameter.*x, out"):
        check_declared("t::add", ("n",), WRITES_OUT, ("x", "out"))


def test_outputs_aliasing_inputs_are_rejected() -> None:
    def returns_view(x: torch.Tensor) -> torch.Tensor:
        return x[1:]

    with pytest.raises(OperatorError, match=r"output 0 shares memory with input `x`"):
        check_outputs("t::view", record_call(returns_view, {"x": torch.ones(3)}, ("x",)))
