"""TMA tensor descriptors under `kernelpick.autotune`: hooks that set block shapes run before each config
compiles, on arguments of its own; descriptors key the tuning, take the fast path and cross to workers.

The kernels are written the way Triton's tutorial 09 writes its TMA matmul: the call passes
descriptors with a placeholder block shape and each config's `pre_hook` sets the real one from the
config's meta-parameters. Without a GPU they run in Triton's interpreter, which reads descriptors too.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import kernelpick
from kernelpick.store import MemoryStore
from kernelpick.tune.dispatch import DescriptorKey

PLACEHOLDER = [1, 1]


def set_block_shapes(nargs: dict[str, Any]) -> None:
    """Tutorial 09's hook: each descriptor's block shape from the config (C's halved when subtiled)."""
    block_m, block_n, block_k = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [block_m, block_k]
    nargs["b_desc"].block_shape = [block_n, block_k]
    subtiled = nargs.get("SUBTILE", False)
    nargs["c_desc"].block_shape = [block_m, block_n // 2 if subtiled else block_n]


@triton.jit
def matmul_tma(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SUBTILE: tl.constexpr = False,
):
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_N)
    pid_n = pid % tl.cdiv(N, BLOCK_N)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
        accumulator = tl.dot(a, b.T, accumulator)
    if SUBTILE:
        halves = tl.permute(tl.reshape(accumulator, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(tl.float16))
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(tl.float16))
    else:
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], accumulator.to(tl.float16))


def tiles(hook: Any = set_block_shapes, subtiles: tuple[bool, ...] = (False,)) -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": 16, "SUBTILE": s}, num_warps=4, pre_hook=hook)
        for m, n in ((16, 16), (32, 32))
        for s in subtiles
    ]


def operands(size: int = 64, dtype: torch.dtype = torch.float16) -> tuple[torch.Tensor, ...]:
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    return a, b, torch.empty(size, size, dtype=torch.float16)


def grid(size: int) -> Any:
    return lambda meta: (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)


def launch(kernel: Any, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> list[TensorDescriptor]:
    """Call as tutorial 09 does: descriptors with a placeholder block shape, sizes by value."""
    descriptors = [TensorDescriptor.from_tensor(t, PLACEHOLDER) for t in (a, b, c)]
    kernel[grid(a.shape[0])](*descriptors, a.shape[0], b.shape[0], a.shape[1])
    return descriptors


def expected(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float().T).to(torch.float16)


def test_a_pre_hook_sets_the_block_shapes_each_config_is_compiled_with() -> None:
    kernel = kernelpick.autotune(tiles(subtiles=(False, True)), key=["M", "N", "K"], store=MemoryStore())(
        matmul_tma
    )
    a, b, c = operands()
    descriptors = launch(kernel, a, b, c)
    torch.testing.assert_close(c, expected(a, b), atol=0.1, rtol=0.01)
    statuses = {str(config): result.status for config, result in kernel.last_tuning.results.items()}
    assert set(statuses.values()) == {"ok"}, statuses  # "accumulator shape is incompatible" before
    assert len(statuses) == 4
    # As in Triton, the real launch ran the picked config's hook on the caller's descriptors.
    best = kernel.best_config.kwargs
    assert descriptors[0].block_shape == [best["BLOCK_M"], best["BLOCK_K"]]


def test_a_hook_writing_a_descriptor_does_not_leak_into_another_config() -> None:
    @triton.jit
    def copy_rows(in_desc, out_desc, ROWS: tl.constexpr):
        tl.static_assert(in_desc.block_shape[0] == ROWS, "the block shape is not the config's")
        offset = tl.program_id(0) * ROWS
        out_desc.store([offset, 0], in_desc.load([offset, 0]))

    def sixteen_rows(nargs: dict[str, Any]) -> None:
        nargs["in_desc"].block_shape = [16, 16]
        nargs["out_desc"].block_shape = [16, 16]

    # The second config has no hook: it runs on the caller's 8-row descriptors, whatever the first
    # config's hook did to its own copies (a shared descriptor would give it 16 rows).
    configs = [triton.Config({"ROWS": 16}, pre_hook=sixteen_rows), triton.Config({"ROWS": 8})]
    kernel = kernelpick.autotune(configs, key=[], store=MemoryStore())(copy_rows)
    x, out = torch.randn(64, 16), torch.empty(64, 16)
    kernel[lambda meta: (64 // meta["ROWS"],)](
        TensorDescriptor.from_tensor(x, [8, 16]), TensorDescriptor.from_tensor(out, [8, 16])
    )
    torch.testing.assert_close(out, x)
    assert {c.kwargs["ROWS"]: r.status for c, r in kernel.last_tuning.results.items()} == {16: "ok", 8: "ok"}


def test_a_constexpr_a_heuristic_derives_from_what_the_hook_set_is_the_configs_own() -> None:
    # EVEN_K comes from the block shape the hook set: 48 is a multiple of 16, not of 32.
    @triton.jit
    def row_sums(x_desc, out_ptr, K, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
        tl.static_assert(EVEN_K == (48 % BLOCK_K == 0), "EVEN_K was derived from another block shape")
        total = tl.zeros((16,), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            total += tl.sum(x_desc.load([tl.program_id(0) * 16, k * BLOCK_K]), axis=1)
        tl.store(out_ptr + tl.program_id(0) * 16 + tl.arange(0, 16), total)

    def block(nargs: dict[str, Any]) -> None:
        nargs["x_desc"].block_shape = [16, nargs["BLOCK_K"]]

    even_k = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["x_desc"].block_shape[1] == 0})
    configs = [triton.Config({"BLOCK_K": k}, pre_hook=block) for k in (16, 32)]
    kernel = kernelpick.autotune(configs, key=["K"], store=MemoryStore())(even_k(row_sums))
    x, out = torch.randn(32, 48), torch.empty(32)
    kernel[(2,)](TensorDescriptor.from_tensor(x, [16, 16]), out, 48)
    torch.testing.assert_close(out, x.sum(dim=1), atol=1e-4, rtol=1e-4)  # zero padding past K
    assert {c.kwargs["BLOCK_K"]: r.status for c, r in kernel.last_tuning.results.items()} == {
        16: "ok",
        32: "ok",
    }


def test_hooks_run_on_copies_while_tuning_so_the_callers_tensors_see_one_launch() -> None:
    calls: list[int] = []

    def shapes_and_a_write(nargs: dict[str, Any]) -> None:
        calls.append(nargs["BLOCK_M"])
        set_block_shapes(nargs)
        nargs["a_desc"].base.add_(1)  # a hook that writes an argument, as zeroing hooks do

    kernel = kernelpick.autotune(tiles(shapes_and_a_write), key=["M", "N", "K"], store=MemoryStore())(
        matmul_tma
    )
    a, b, c = operands()
    before = a.clone()
    launch(kernel, a, b, c)
    # Each config's hook ran before it compiled and around its timed runs, on private copies; the
    # real launch ran the picked config's hook once on the caller's tensor, as Triton's launch does.
    assert len(calls) > 2
    torch.testing.assert_close(a, before + 1)
    torch.testing.assert_close(c, expected(a, b), atol=0.1, rtol=0.01)


def test_a_config_that_fails_to_compile_has_its_hooks_called_as_a_failing_launch_has() -> None:
    seen: list[str] = []

    def pre_hook(nargs: dict[str, Any]) -> None:
        seen.append(f"pre {nargs['BLOCK_M']}")

    def post_hook(nargs: dict[str, Any], exception: BaseException | None) -> None:
        seen.append(f"post {nargs['BLOCK_M']} {'failed' if exception else 'ran'}")

    @triton.jit
    def refuses_32(
        a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr
    ):
        tl.static_assert(BLOCK_M != 32, "no 32-row tiles")
        c_desc.store([0, 0], tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16))

    configs = [
        triton.Config({"BLOCK_M": m, "BLOCK_N": 16, "BLOCK_K": 16}, pre_hook=set_block_shapes)
        for m in (16, 32)
    ]
    kernel = kernelpick.autotune(
        configs, key=[], store=MemoryStore(), pre_hook=pre_hook, post_hook=post_hook
    )(refuses_32)
    launch(kernel, *operands(32))
    # The failing config: its hooks once before compiling, then the post_hook told of the failure.
    assert [s for s in seen if "32" in s] == ["pre 32", "post 32 failed"]
    assert seen.count("post 16 ran") >= 1
    assert kernel.last_tuning.results[kernelpick.Config.of(configs[1])].status == "compile_error"


def test_warmup_compiles_each_config_after_its_hook() -> None:
    kernel = kernelpick.autotune(tiles(subtiles=(False, True)), key=["M", "N", "K"], store=MemoryStore())(
        matmul_tma
    )
    a, b, c = operands()
    descriptors = [TensorDescriptor.from_tensor(t, PLACEHOLDER) for t in (a, b, c)]
    outcomes = kernel.warmup(*descriptors, 64, 64, 64, grid=(1,))
    assert [o.status for o in outcomes] == ["ok"] * 4
    assert [d.block_shape for d in descriptors] == [PLACEHOLDER] * 3  # the caller's are left alone


def test_descriptors_key_the_tuning_by_dtype_and_reused_ones_take_the_fast_path() -> None:
    kernel = kernelpick.autotune(tiles(), key=["M", "N", "K"], store=MemoryStore())(matmul_tma)
    a, b, c = operands()
    reused = launch(kernel, a, b, c)
    # The hook changed the caller's descriptors' block shapes: set by the hooks, they are not keyed.
    kernel[grid(64)](*reused, 64, 64, 64)
    launch(kernel, a, b, c)
    assert len(kernel.tunings) == 1
    assert len(kernel._dispatch.fast) == 1  # later calls are a dictionary lookup
    launch(kernel, *operands(dtype=torch.float32))  # tf32 operands: another kernel, another tuning
    assert len(kernel.tunings) == 2
    assert DescriptorKey(torch.float32, None) in kernel.last_tuning.key


def test_without_hooks_a_descriptors_block_shape_keys_the_tuning() -> None:
    @triton.jit
    def double(in_desc, out_desc, ROWS: tl.constexpr):
        block = in_desc.load([tl.program_id(0) * ROWS, 0])
        out_desc.store([tl.program_id(0) * ROWS, 0], block * 2)

    kernel = kernelpick.autotune(
        [triton.Config({}, num_warps=w) for w in (2, 4)], key=[], store=MemoryStore()
    )(double)
    x, out = torch.randn(64, 16), torch.empty(64, 16)
    for rows in (8, 16, 8):
        kernel[(64 // rows,)](
            TensorDescriptor.from_tensor(x, [rows, 16]),
            TensorDescriptor.from_tensor(out, [rows, 16]),
            ROWS=rows,
        )
        torch.testing.assert_close(out, 2 * x)
    assert len(kernel.tunings) == 2  # one per block shape


@pytest.mark.slow
def test_descriptors_cross_to_isolated_workers_with_the_programs_allocator() -> None:
    allocated: list[int] = []

    def allocator(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        allocated.append(size)
        return torch.empty(size, dtype=torch.int8)

    @triton.jit
    def double(in_desc, out_desc, ROWS: tl.constexpr):
        block = in_desc.load([tl.program_id(0) * ROWS, 0])
        out_desc.store([tl.program_id(0) * ROWS, 0], block * 2)

    kernel = kernelpick.autotune(
        [triton.Config({}, num_warps=w) for w in (2, 4)], key=[], store=MemoryStore(), isolate=True
    )(double)
    x, out = torch.randn(64, 16), torch.empty(64, 16)
    triton.set_allocator(allocator)
    try:
        kernel[(4,)](
            TensorDescriptor.from_tensor(x, [16, 16]), TensorDescriptor.from_tensor(out, [16, 16]), ROWS=16
        )
    finally:
        triton.set_allocator(triton.runtime._allocation.NullAllocator())
    torch.testing.assert_close(out, 2 * x)
    assert kernel.timed_here == {}  # measured in the workers, descriptors and allocator sent
    assert {r.status for r in kernel.last_tuning.results.values()} == {"ok"}
