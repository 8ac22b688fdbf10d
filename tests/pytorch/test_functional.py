"""`kernelpick.launch` (in place) and `kernelpick.functional` (clones by name), eager and under every tracer."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import triton
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import kernelpick
from kernelpick.errors import OperatorError
from kernelpick.pytorch.traced import DYNAMO_TAKES_KERNELS
from tests.pytorch.kernels import BLOCK, add_kernel, blocks, increment_kernel, strided_copy_kernel

tuned_increment = kernelpick.autotune([triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 16})], key=["n"])(
    increment_kernel
)


def test_functional_returns_clones_by_name_with_strides_and_leaves_inputs_alone() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    out = torch.zeros(4, 3).t()  # column-major 3 x 4
    written = kernelpick.functional(strided_copy_kernel)(
        (3,), x, out, 3, 4, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK=BLOCK
    )
    assert list(written) == ["out_ptr"]
    clone = written["out_ptr"]
    assert clone.stride() == out.stride() and torch.equal(clone, x)
    assert torch.equal(out, torch.zeros(3, 4)) and torch.equal(x, torch.arange(12.0).reshape(3, 4))


def test_functional_takes_a_grid_like_a_kernel_and_clones_a_tensor_passed_twice_once() -> None:
    x = torch.ones(8)
    written = kernelpick.functional(add_kernel)[blocks(8)](x, x, x, 8, BLOCK=BLOCK)
    assert list(written) == ["out_ptr"] and torch.equal(written["out_ptr"], torch.full((8,), 2.0))
    assert torch.equal(x, torch.ones(8))


def test_launch_writes_in_place() -> None:
    x = torch.zeros(10)
    kernelpick.launch(increment_kernel, blocks(10), x, 10, BLOCK=BLOCK)
    kernelpick.launch(tuned_increment, lambda meta: (triton.cdiv(10, meta["BLOCK"]),), x, 10)
    assert torch.equal(x, torch.full((10,), 2.0))


def pipeline(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = x * 2
    kernelpick.launch(increment_kernel, (triton.cdiv(z.numel(), BLOCK),), z, z.numel(), BLOCK=BLOCK)
    n = z.numel()
    out = kernelpick.functional(add_kernel)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](
        z, y, torch.empty_like(z), n, BLOCK=BLOCK
    )["out_ptr"]
    kernelpick.launch(tuned_increment, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), out, n)
    kernelpick.launch(increment_kernel, (1,), x, 4, BLOCK=BLOCK)  # writes the first 4 elements of an input
    return out


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(6.0), torch.ones(6)


def run(fn):  # type: ignore[no-untyped-def]
    x, y = inputs()
    return fn(x, y), x, y


def assert_same(actual, expected) -> None:  # type: ignore[no-untyped-def]
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)


class Wrapper(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return pipeline(x, y)


@pytest.mark.skipif(
    not DYNAMO_TAKES_KERNELS, reason="this torch's Dynamo cannot pass kernel objects to kernelpick"
)
@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_without_graph_breaks_equals_eager(dynamic: bool) -> None:
    expected = run(pipeline)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    assert_same(run(torch.compile(pipeline, backend=counter, fullgraph=True, dynamic=dynamic)), expected)
    assert counter.frame_count == 1
    assert counter.graphs[0].code.count("torch.ops.kernelpick.functional_launch") == 4


def test_exported_make_fx_functionalized_and_fake_runs_agree() -> None:
    expected = run(pipeline)
    exported = torch.export.export(Wrapper(), inputs())
    assert_same(run(exported.module()), expected)
    traced = make_fx(pipeline)(*inputs())
    assert "functional_launch" in traced.code and "copy_" in traced.code
    assert_same(run(traced), expected)
    assert_same(run(torch.func.functionalize(pipeline)), expected)
    functional_graph = make_fx(torch.func.functionalize(pipeline))(*inputs())
    # Functional inside; the one in-place copy left writes the input x back, as functionalization does.
    assert (
        functional_graph.code.count("aten.copy_.default") == 1
        and "aten.copy_.default(x_1, " in functional_graph.code
    )
    with FakeTensorMode() as mode:
        fake = pipeline(*(mode.from_tensor(t) for t in inputs()))
    assert fake.shape == expected[0].shape and fake.stride() == expected[0].stride()


def test_tracing_twice_gives_the_same_ids() -> None:
    assert make_fx(pipeline)(*inputs()).code == make_fx(pipeline)(*inputs()).code


def test_tensors_inside_other_arguments_cannot_be_traced() -> None:
    @triton.jit
    def tuple_kernel(pair, n):
        pass

    with pytest.raises(OperatorError, match="holds tensors inside a tuple"):
        make_fx(lambda x: kernelpick.launch(tuple_kernel, (1,), (x, x), 1))(torch.ones(2))
