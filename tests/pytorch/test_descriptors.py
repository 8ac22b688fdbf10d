"""Host tensor descriptors (TMA) as kernel arguments: `launch`, `functional` and `op`, eager and under every tracer."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from triton.tools.tensor_descriptor import TensorDescriptor

import kernelpick
from kernelpick.pytorch.launch_tracing import recording
from kernelpick.pytorch.side_table import side_table
from kernelpick.pytorch.traced import DYNAMO_TAKES_KERNELS

TILE = 16


@triton.jit
def scale_tiles_kernel(x_desc, out_desc, factor, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out = x * factor, one BLOCK_M x BLOCK_N tile per program, read and written through descriptors."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    out_desc.store([off_m, off_n], x_desc.load([off_m, off_n]) * factor)


@triton.jit
def accumulate_tiles_kernel(acc_desc, x_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """acc += x, in place through the descriptor of acc."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc_desc.store([off_m, off_n], acc_desc.load([off_m, off_n]) + x_desc.load([off_m, off_n]))


def descriptors(*tensors: torch.Tensor) -> list[TensorDescriptor]:
    return [TensorDescriptor.from_tensor(t, [TILE, TILE]) for t in tensors]


def tiles(rows: int, cols: int) -> tuple[int, int]:
    return triton.cdiv(rows, TILE), triton.cdiv(cols, TILE)


# --- kernelpick.functional and kernelpick.launch ---------------------------------------------------


def scaled(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """3 * x in a clone of `out`, by the functional form of a descriptor kernel."""
    x_desc, out_desc = descriptors(x, out)
    written = kernelpick.functional(scale_tiles_kernel)[tiles(*x.shape)](
        x_desc, out_desc, 3.0, BLOCK_M=TILE, BLOCK_N=TILE
    )
    assert list(written) == ["out_desc"]
    return written["out_desc"]


def padded_rows() -> tuple[torch.Tensor, torch.Tensor]:
    """x (32 x 48) and an `out` of the same size whose rows are 64 elements apart."""
    return torch.randn(32, 48), torch.zeros(32, 64)[:, :48]


@pytest.mark.parametrize("how", ["eager", "make_fx", "symbolic make_fx"])
def test_functional_returns_the_written_base_under_the_descriptors_name_with_its_strides(how: str) -> None:
    x, out = padded_rows()
    fn = {
        "eager": scaled,
        "make_fx": make_fx(scaled)(x, out),
        "symbolic make_fx": make_fx(scaled, tracing_mode="symbolic")(x, out),
    }[how]
    clone = fn(x, out)
    torch.testing.assert_close(clone, 3 * x)
    assert clone.stride() == (64, 1), "the clone keeps the base's strides"
    assert torch.equal(out, torch.zeros(32, 48)), "the argument itself is untouched"
    with FakeTensorMode() as mode:
        fake = scaled(mode.from_tensor(x), mode.from_tensor(out))
    assert fake.shape == (32, 48) and fake.stride() == (64, 1)


def add_in_place(x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
    """acc += 2 * x by a kernel writing through the descriptor of the input `acc`."""
    acc_desc, x_desc = descriptors(acc, x * 2)
    kernelpick.launch(
        accumulate_tiles_kernel, tiles(*acc.shape), acc_desc, x_desc, BLOCK_M=TILE, BLOCK_N=TILE
    )
    return acc + 1


def accumulator_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(32.0 * 32).reshape(32, 32), torch.ones(32, 32)


def run(fn):  # type: ignore[no-untyped-def]
    """The result and both inputs after the call (the launch writes `acc`)."""
    x, acc = accumulator_inputs()
    return fn(x, acc), x, acc


def assert_same(actual, expected) -> None:  # type: ignore[no-untyped-def]
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)


class AddInPlace(torch.nn.Module):
    def forward(self, x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        return add_in_place(x, acc)


def test_launch_writes_the_descriptors_base_in_place_under_every_tracer() -> None:
    expected = run(add_in_place)
    x, acc = expected[1], expected[2]
    torch.testing.assert_close(acc, 1 + 2 * x)
    for mode in ("real", "fake", "symbolic"):
        traced = make_fx(add_in_place, tracing_mode=mode)(*accumulator_inputs())
        assert "kernelpick.functional_launch" in traced.code and "aten.copy_" in traced.code
        assert_same(run(traced), expected)
    assert_same(run(torch.export.export(AddInPlace(), accumulator_inputs()).module()), expected)
    assert_same(run(torch.func.functionalize(add_in_place)), expected)
    with FakeTensorMode() as mode:
        fake = add_in_place(*(mode.from_tensor(t) for t in accumulator_inputs()))
    assert fake.shape == (32, 32)


@triton.jit
def copy_tile_kernel(x_desc, out_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[:BLOCK_M, :BLOCK_N] = x[:BLOCK_M, :BLOCK_N], out-of-bounds elements as the descriptor pads them."""
    out_desc.store([0, 0], x_desc.load([0, 0]))


def padded_copy(flat: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """A 16 x 8 view of a flat buffer copied into a 16 x 16 tile: the 8 columns beyond it are NaN padding."""
    x_desc = TensorDescriptor(flat, [16, 8], [8, 1], [TILE, TILE], padding="nan")
    (out_desc,) = descriptors(out)
    written = kernelpick.functional(copy_tile_kernel)[(1,)](x_desc, out_desc, BLOCK_M=TILE, BLOCK_N=TILE)
    return written["out_desc"]


class PaddedCopy(torch.nn.Module):
    def forward(self, flat: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return padded_copy(flat, out)


def test_a_descriptor_is_made_again_with_its_own_shape_strides_and_padding() -> None:
    x = torch.randn(16, 8)
    flat, out = x.flatten(), torch.zeros(16, 16)
    exported = torch.export.export(PaddedCopy(), (flat, out)).module()
    for fn in (padded_copy, make_fx(padded_copy)(flat, out), exported):
        tile = fn(flat, out)
        assert torch.equal(tile[:, :8], x) and tile[:, 8:].isnan().all()


def test_a_gluon_descriptor_crosses_the_graph_with_its_layout() -> None:
    hopper = pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def gluon_kernel(x_desc):
        pass  # only launched into a recorder: Gluon kernels need a GPU

    layout = gl.NVMMASharedLayout.get_default_for([TILE, TILE], gl.float16)

    def launch_gluon(x: torch.Tensor) -> None:
        # Gluon's descriptor reads its tensor's address, so it is made from real tensors only.
        kernelpick.launch(gluon_kernel, (2,), hopper.TensorDescriptor.from_tensor(x, [TILE, TILE], layout))

    x = torch.zeros(32, 16, dtype=torch.float16)
    with recording() as launches:  # the graph's operator hands its launch over instead of running it
        graph = make_fx(launch_gluon)(x)
    assert "kernelpick.functional_launch" in graph.code
    ((x_desc,),) = [recorded.args for recorded in launches]
    assert type(x_desc) is hopper.TensorDescriptor and x_desc.base is x
    assert x_desc.layout == layout and x_desc.block_shape == [TILE, TILE]
    assert list(x_desc.shape) == [32, 16] and list(x_desc.strides) == [16, 1]


def test_tracing_twice_gives_the_same_graph_and_adds_nothing_to_the_side_table() -> None:
    first = make_fx(add_in_place)(*accumulator_inputs()).code
    sizes = side_table.sizes()
    assert make_fx(add_in_place)(*accumulator_inputs()).code == first
    assert side_table.sizes() == sizes


def call_with_descriptors(fn):  # type: ignore[no-untyped-def]
    """fn(acc_desc, x_desc), and both tensors after the call."""
    x, acc = accumulator_inputs()
    return fn(*descriptors(acc, x)), x, acc


def compiled_once(fn, dynamic: bool):  # type: ignore[no-untyped-def]
    """The result of fn compiled with fullgraph=True, and the graph Dynamo made (one, or it fails)."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    result = call_with_descriptors(torch.compile(fn, backend=counter, fullgraph=True, dynamic=dynamic))
    assert counter.frame_count == 1
    return result, counter.graphs[0].code


#: Made outside compiled code, so that Dynamo before torch 2.13 can trace them too.
functional_accumulate = kernelpick.functional(accumulate_tiles_kernel)
functional_scale = kernelpick.functional(scale_tiles_kernel)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_functional_launches_take_descriptors_passed_in(dynamic: bool) -> None:
    def step(acc_desc: TensorDescriptor, x_desc: TensorDescriptor) -> torch.Tensor:
        grid = tiles(*acc_desc.shape)
        summed = functional_accumulate[grid](acc_desc, x_desc, BLOCK_M=TILE, BLOCK_N=TILE)["acc_desc"]
        return summed + functional_scale[grid](acc_desc, x_desc, 2.0, BLOCK_M=TILE, BLOCK_N=TILE)["out_desc"]

    expected = call_with_descriptors(step)
    actual, code = compiled_once(step, dynamic)
    assert_same(actual, expected)
    assert code.count("torch.ops.kernelpick.functional_launch") == 2 and "copy_" not in code


@pytest.mark.skipif(
    not DYNAMO_TAKES_KERNELS,
    reason="this torch's Dynamo launches kernels its own way, without passed-in descriptors",
)
@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_in_place_launches_take_descriptors_passed_in(dynamic: bool) -> None:
    def step(acc_desc: TensorDescriptor, x_desc: TensorDescriptor) -> torch.Tensor:
        kernelpick.launch(
            accumulate_tiles_kernel, tiles(*acc_desc.shape), acc_desc, x_desc, BLOCK_M=TILE, BLOCK_N=TILE
        )
        return acc_desc.base * 2

    expected = call_with_descriptors(step)
    actual, code = compiled_once(step, dynamic)
    assert_same(actual, expected)
    assert "torch.ops.kernelpick.functional_launch" in code and "copy_" in code


# --- kernelpick.op over functions that build descriptors -------------------------------------------


@kernelpick.op("kp_test_descriptors::accumulate_")
def accumulate_(acc: torch.Tensor, x: torch.Tensor) -> None:
    """acc += x, the descriptors built here from the inputs."""
    acc_desc, x_desc = descriptors(acc, x)
    accumulate_tiles_kernel[tiles(*acc.shape)](acc_desc, x_desc, BLOCK_M=TILE, BLOCK_N=TILE)


def accumulate_twice(x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
    accumulate_(acc, x)
    accumulate_(acc, x)
    return acc * 2


class AccumulateTwice(torch.nn.Module):
    def forward(self, x: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        return accumulate_twice(x, acc)


def test_an_operator_writing_through_a_descriptor_mutates_the_descriptors_input() -> None:
    expected = run(accumulate_twice)
    assert accumulate_.mutates_args == ("acc",)
    assert accumulate_.inference.why("acc") == (
        "kernel `accumulate_tiles_kernel` writes `acc` through its parameter `acc_desc`"
    )
    torch.testing.assert_close(expected[2], 1 + 2 * expected[1])
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    assert_same(run(torch.compile(accumulate_twice, backend=counter, fullgraph=True)), expected)
    assert counter.frame_count == 1
    assert_same(run(torch.export.export(AccumulateTwice(), accumulator_inputs()).module()), expected)
    with FakeTensorMode() as mode:
        assert accumulate_(*(mode.from_tensor(t) for t in accumulator_inputs())) is None


def set_block_shapes(nargs: dict[str, object]) -> None:
    """Triton's tutorial 09: the descriptors are made with a placeholder block, each config sets its own."""
    block_m, block_n, block_k = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["a_desc"].block_shape = [block_m, block_k]  # type: ignore[attr-defined]
    nargs["b_desc"].block_shape = [block_n, block_k]  # type: ignore[attr-defined]
    nargs["c_desc"].block_shape = [block_m, block_n]  # type: ignore[attr-defined]


@kernelpick.autotune(
    [
        triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16}, pre_hook=set_block_shapes)
        for m in (16, 32)
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel_tma(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):
    """C = A @ B.T through descriptors, as tutorial 09 writes it (without its persistent loop)."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    offs_am = (pid // num_pid_n) * BLOCK_SIZE_M
    offs_bn = (pid % num_pid_n) * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([offs_am, k * BLOCK_SIZE_K])
        b = b_desc.load([offs_bn, k * BLOCK_SIZE_K])
        accumulator = tl.dot(a, b.T, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(tl.float16))


@kernelpick.op("kp_test_descriptors::matmul_tma")
def matmul_tma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b.T (b is N x K), as tutorial 09's host code launches it."""
    (M, K), (N, _) = a.shape, b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    dummy_block = [1, 1]  # overwritten by the configs' pre_hook
    a_desc, b_desc, c_desc = (TensorDescriptor.from_tensor(t, dummy_block) for t in (a, b, c))

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

    matmul_kernel_tma[grid](a_desc, b_desc, c_desc, M, N, K)
    return c


def test_an_operator_launching_an_autotuned_kernel_whose_pre_hook_sets_the_block_shapes() -> None:
    a, b = torch.randn(32, 48, dtype=torch.float16), torch.randn(64, 48, dtype=torch.float16)
    expected = (a.float() @ b.float().T).half()
    torch.testing.assert_close(matmul_tma(a, b), expected, atol=1e-2, rtol=1e-2)
    assert matmul_tma.mutates_args == () and matmul_tma.inference.certain
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: matmul_tma(a, b) + 1, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(a, b), expected + 1, atol=1e-2, rtol=1e-2)
