"""Running launches where their tensors live: CPU tensors in Triton's interpreter, whatever the wrapper."""

from __future__ import annotations

import pytest
import torch
import triton

import kernelpick
from kernelpick.errors import OperatorError
from kernelpick.pytorch.running import kernel_name, on_cpu, routing_cpu_launches, run_kernel, tensors_in
from tests.pytorch.kernels import BLOCK, add_kernel, blocks, increment_kernel


def test_plain_heuristic_autotuned_and_kernelpick_kernels_run_on_cpu() -> None:
    x = torch.zeros(40)
    run_kernel(increment_kernel, blocks(40), (x, 40), {"BLOCK": BLOCK})
    run_kernel(triton.heuristics({"BLOCK": lambda args: 8})(increment_kernel), (5,), (x, 40), {})
    run_kernel(
        triton.autotune([triton.Config({"BLOCK": 64})], key=["n"])(increment_kernel), (1,), (x, 40), {}
    )
    tuned = kernelpick.autotune([triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 64})], key=["n"])
    run_kernel(tuned(increment_kernel), lambda meta: (triton.cdiv(40, meta["BLOCK"]),), (x, 40), {})
    assert torch.equal(x, torch.full((40,), 4.0))


def test_user_code_launching_kernels_runs_on_cpu_inside_the_routing_scope() -> None:
    x, y = torch.arange(20.0), torch.ones(20)
    out = torch.empty(20)
    with routing_cpu_launches():
        add_kernel[blocks(20)](x, y, out, 20, BLOCK=BLOCK)
    assert torch.equal(out, x + 1)


def test_a_failing_heuristic_is_reported_with_the_kernel_name() -> None:
    broken = triton.heuristics({"BLOCK": lambda args: args["missing"]})(increment_kernel)
    with pytest.raises(OperatorError, match=r"increment_kernel.*heuristic for `BLOCK`"):
        run_kernel(broken, (1,), (torch.zeros(4), 4), {})


def test_helpers() -> None:
    x = torch.zeros(2)
    assert list(tensors_in([1, (x, [x]), None])) == [x, x]
    assert on_cpu((1, x), {}) and not on_cpu((1,), {})
    assert kernel_name(triton.autotune([triton.Config({})], key=[])(increment_kernel)) == "increment_kernel"
