"""A `kernelpick.op` under torch.compile: what AOTAutograd hands Inductor is the function itself, each
launch through `torch.library.wrap_triton` (Inductor launches it from its own code), not the operator.

On the CPU the graph is only made, for fake CUDA tensors: Inductor compiles no Triton kernel for CPU
tensors, whose calls keep the operator (and run in Triton's interpreter)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
import triton
from torch._functorch.aot_autograd import aot_export_module
from torch._subclasses.fake_tensor import FakeTensorMode

import kernelpick
from kernelpick import settings
from tests.tune.kernels import add_kernel, increment_kernel

_names = itertools.count()


#: A kernelpick.autotune kernel: it tunes when the program runs, so a compiled graph keeps its operator.
tuned_increment = kernelpick.autotune(
    configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"]
)(increment_kernel)


def operator(fn: Callable[..., Any], **options: Any) -> Any:
    """`fn` as a kernelpick.op of a name no other test uses, registered from CPU example inputs."""
    return kernelpick.op(
        f"compiled_launches::op{next(_names)}",
        fn,
        example_inputs=(torch.randn(100), torch.randn(100)),
        **options,
    )


def graph_code(op: Any, device: str = "cuda") -> str:
    """The graph AOTAutograd makes of a module calling `op` on two inputs of 100 on `device` (fake)."""

    class Module(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
            out = op(x, y)
            return (x * 2 if out is None else out * 2,)

    with FakeTensorMode():
        x, y = torch.empty(100, device=device), torch.empty(100, device=device)
        graph, _ = aot_export_module(Module(), [x, y], trace_joint=False)
    return str(graph.code)


def added(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64, num_warps=2)
    return out


def test_a_compiled_graph_gets_the_functions_launches_not_the_operator() -> None:
    op = operator(added)
    code = graph_code(op)
    assert "triton_kernel_wrapper_functional" in code and op.name.split("::")[1] not in code, code
    assert "empty_like" in code  # the function's own allocation, traced
    assert "'BLOCK': 64" in code  # the constexprs as given; num_warps under a one-config autotune


def test_an_operator_writing_its_input_with_a_kernel_is_traced_too() -> None:
    def increment_(x: torch.Tensor, y: torch.Tensor) -> None:
        increment_kernel[(triton.cdiv(x.numel(), 64),)](x, x.numel(), BLOCK=64)

    op = operator(increment_)
    assert op._mutated == ("x",)
    code = graph_code(op)
    assert "triton_kernel_wrapper_functional" in code and op.name.split("::")[1] not in code, code


def test_the_operator_stays_where_inductor_cannot_launch_its_kernels() -> None:
    def tuned_(x: torch.Tensor, y: torch.Tensor) -> None:  # a kernelpick.autotune kernel: tuned at run time
        tuned_increment[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, x.numel())

    def written_by_torch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.add_(1)  # a PyTorch write besides the kernel's
        return added(x, y)

    for fn in (tuned_, written_by_torch):
        op = operator(fn)
        code = graph_code(op)
        assert op.name.split("::")[1] in code and "triton_kernel_wrapper" not in code, code
    op = operator(added)
    assert op.name.split("::")[1] in graph_code(op, device="cpu")  # run in Triton's interpreter
    for setting in ("library", "off"):
        with settings.override(compiled_picks=setting):
            assert op.name.split("::")[1] in graph_code(op)
