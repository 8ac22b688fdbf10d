"""Operators under every PyTorch tracer: torch.compile (no graph breaks), torch.export, FakeTensorMode, make_fx,
functionalization, each equal to eager mode for in-place, out-of-place, mixed and through-a-view operators."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import kernelpick
from tests.pytorch.kernels import (
    BLOCK,
    add,
    add_and_increment_,
    blocks,
    column_major_copy,
    increment_,
    increment_kernel,
    increment_row_,
)

_names = itertools.count()


def out_of_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return add(x * 2, y) + 1


def in_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    increment_(x)
    z = y * 3
    increment_(z)
    return z


def mixed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return add_and_increment_(x, y) * x


def through_a_view(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    grid = x.view(4, 4)
    increment_row_(grid, 2)
    return grid.sum(dim=1) + y[:4]


CASES = {"out of place": out_of_place, "in place": in_place, "mixed": mixed, "through a view": through_a_view}


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(16.0), torch.linspace(-1, 1, 16)


def run(fn: Callable[..., torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The result and the two inputs after the call (in-place operators change them)."""
    x, y = inputs()
    return fn(x, y), x, y


class Wrapper(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fn(x, y)


def assert_same(actual: tuple[torch.Tensor, ...], expected: tuple[torch.Tensor, ...]) -> None:
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)


def captured_graphs() -> tuple[Any, list[torch.fx.GraphModule]]:
    """A backend like aot_eager that also keeps the functionalized forward graphs AOTAutograd produces."""
    graphs: list[torch.fx.GraphModule] = []

    def keep(graph: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(graph)
        return graph

    return aot_autograd(fw_compiler=keep), graphs


@pytest.mark.parametrize("case", CASES)
def test_compiled_fullgraph_and_exported_equal_eager(case: str) -> None:
    fn = CASES[case]
    expected = run(fn)
    torch._dynamo.reset()
    backend, graphs = captured_graphs()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    assert_same(run(torch.compile(fn, backend=counter, fullgraph=True)), expected)
    assert counter.frame_count == 1, "one graph: no graph break"
    explained = torch._dynamo.explain(fn)(*inputs())
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    ours = [
        n
        for n in graphs[0].graph.nodes
        if "kp_test_kernels" in str(n.target) or "auto_functionalized" in str(n.target)
    ]
    assert ours, f"the operator is in the graph AOTAutograd produced:\n{graphs[0].code}"
    exported = torch.export.export(Wrapper(fn), inputs())
    assert "kp_test_kernels" in exported.graph_module.code
    assert_same(run(exported.module()), expected)


@pytest.mark.slow
def test_inductor_runs_all_four_cases() -> None:
    def all_four(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cat([fn(x, y).flatten() for fn in CASES.values()])

    expected = run(all_four)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    assert_same(run(torch.compile(all_four, backend=counter, fullgraph=True)), expected)
    assert counter.frame_count == 1


def test_mutations_are_functionalized_in_the_compiled_graph() -> None:
    torch._dynamo.reset()
    backend, graphs = captured_graphs()
    torch.compile(in_place, backend=backend, fullgraph=True)(*inputs())
    code = graphs[0].code
    assert "auto_functionalized" in code and "torch.ops.kp_test_kernels.increment_.default" in code
    (output,) = [n for n in graphs[0].graph.nodes if n.op == "output"]
    assert len(output.args[0]) == 2, "the new value of the input x is returned, for the runtime to write back"


def test_dynamic_shapes_compile_once_for_several_sizes() -> None:
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(out_of_place, backend=counter, fullgraph=True, dynamic=True)
    for n in (5, 9, 33):
        x, y = torch.arange(float(n)), torch.ones(n)
        torch.testing.assert_close(compiled(x, y), out_of_place(x, y))
    assert counter.frame_count == 1


def test_fake_tensors_get_the_shapes_and_strides_of_eager_outputs() -> None:
    real = torch.arange(12.0).reshape(3, 4)
    eager = column_major_copy(real)
    assert eager.stride() == (1, 3) and torch.equal(eager, real)
    with FakeTensorMode() as mode:
        fake_input = mode.from_tensor(real)
        fake = column_major_copy(fake_input)
        also = add(fake_input, fake_input)
        assert increment_(fake_input) is None
    assert fake.shape == eager.shape and fake.stride() == eager.stride() and fake.dtype == eager.dtype
    assert also.shape == real.shape and also.stride() == real.stride()


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_make_fx_records_the_operators(mode: str) -> None:
    graph = make_fx(mixed, tracing_mode=mode)(*inputs())
    assert "torch.ops.kp_test_kernels.add_and_increment_.default" in graph.code
    assert_same(run(graph), run(mixed))


def test_torch_func_functionalize_of_in_place_operators_is_correct() -> None:
    for fn in (in_place, mixed, through_a_view):
        assert_same(run(torch.func.functionalize(fn)), run(fn))
        graph = make_fx(torch.func.functionalize(fn))(*inputs())
        assert "auto_functionalized" in graph.code
        assert_same(run(graph), run(fn))


def test_a_first_call_inside_torch_compile_registers_the_operator() -> None:
    name = f"kp_test_traced::fresh_{next(_names)}"

    @kernelpick.op(name)
    def fresh_increment_(x: torch.Tensor) -> None:
        increment_kernel[blocks(x.numel())](x, x.numel(), BLOCK=BLOCK)

    def fn(x: torch.Tensor) -> torch.Tensor:
        fresh_increment_(x)
        return x * 2

    assert not fresh_increment_.registered
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    x = torch.zeros(5)
    assert torch.equal(torch.compile(fn, backend=counter, fullgraph=True)(x), torch.full((5,), 2.0))
    assert torch.equal(x, torch.ones(5)) and counter.frame_count == 1
    assert fresh_increment_.registered and fresh_increment_.mutates_args == ("x",)


def test_autotuned_kernels_in_an_operator_compile_and_export() -> None:
    import triton

    tuned = kernelpick.autotune([triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 32})], key=["n"])(
        increment_kernel
    )
    theirs = triton.autotune([triton.Config({"BLOCK": 8})], key=["n"])(increment_kernel)

    @kernelpick.op(f"kp_test_traced::tuned_{next(_names)}")
    def twice_(x: torch.Tensor) -> None:
        n = x.numel()
        tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
        theirs[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        twice_(x)
        return x + y

    expected = run(fn)
    assert twice_.mutates_args == ("x",)
    torch._dynamo.reset()
    assert_same(run(torch.compile(fn, backend="aot_eager", fullgraph=True)), expected)
    assert_same(run(torch.export.export(Wrapper(fn), inputs()).module()), expected)


def test_an_operator_calling_kernelpick_ops_selects_only_when_it_runs() -> None:
    from kernelpick import ops

    @kernelpick.op(f"kp_test_traced::project_{next(_names)}")
    def project(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return ops.mm(x, weight) * 2

    def rows_of(m: int) -> list[Any]:  # what ops.mm selected for an (m, 24) x (24, 8) product
        return [r for r in ops.selector("mm").records.values() if r.signature.tensor(0).size == (m, 24)]

    weight = torch.randn(24, 8)
    project.register(
        torch.randn(11, 24), weight
    )  # recorded on fake tensors: ops.mm describes, selects nothing
    assert project.mutates_args == () and not rows_of(11)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    x = torch.randn(11, 24)
    torch.testing.assert_close(
        torch.compile(project, backend=counter, fullgraph=True)(x, weight), 2 * x @ weight
    )
    assert counter.frame_count == 1 and len(rows_of(11)) == 1
    x = torch.randn(13, 24)
    exported = torch.export.export(Wrapper(project), (x, weight))
    assert not rows_of(13)
    torch.testing.assert_close(exported.module()(x, weight), 2 * x @ weight)
    assert len(rows_of(13)) == 1
