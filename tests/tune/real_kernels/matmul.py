# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Tutorial 03's matmul, written as the tutorial writes it: a grouped-order tiled GEMM with a fused
activation, tuned over block sizes, warps and stages, keyed on M, N and K."""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from tests.tune.real_kernels.base import Autotune, Case, Inputs, Size, TutorialCall, generator

#: The tutorial's CUDA configs: (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_stages, num_warps),
#: the last eight meant for fp8 inputs; GROUP_SIZE_M is 8 in each.
CUDA_TILES = (
    (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
    (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
    (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4),
)  # fmt: skip


def tile_configs(tiles: tuple[tuple[int, int, int, int, int], ...]) -> list[triton.Config]:
    return [
        triton.Config(
            {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
            num_stages=stages,
            num_warps=warps,
        )
        for m, n, k, stages, warps in tiles
    ]


def tutorial_configs() -> list[triton.Config]:
    return tile_configs(CUDA_TILES)


def tiny_configs() -> list[triton.Config]:
    return tile_configs(((32, 32, 32, 3, 4), (16, 32, 16, 2, 2)))


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def make_matmul_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        ACTIVATION: tl.constexpr,
    ):  # fmt: skip
        # Programs walk C in groups of GROUP_SIZE_M block-rows, so that neighbours share A and B in L2.
        pid = tl.program_id(axis=0)
        blocks_m = tl.cdiv(M, BLOCK_SIZE_M)
        blocks_n = tl.cdiv(N, BLOCK_SIZE_N)
        programs_per_group = GROUP_SIZE_M * blocks_n
        group = pid // programs_per_group
        group_first_m = group * GROUP_SIZE_M
        group_rows = min(blocks_m - group_first_m, GROUP_SIZE_M)
        pid_m = group_first_m + ((pid % programs_per_group) % group_rows)
        pid_n = (pid % programs_per_group) // group_rows

        tl.assume(pid_m >= 0)
        tl.assume(pid_n >= 0)
        tl.assume(stride_am > 0)
        tl.assume(stride_ak > 0)
        tl.assume(stride_bn > 0)
        tl.assume(stride_bk > 0)
        tl.assume(stride_cm > 0)
        tl.assume(stride_cn > 0)

        # Rows of A and columns of B wrap around (modulo) instead of being masked: the wrapped values
        # only reach rows and columns of C that are not stored.
        rows = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
        cols = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
        ks = tl.arange(0, BLOCK_SIZE_K)
        a_block = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
        b_block = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            k_left = K - step * BLOCK_SIZE_K
            a = tl.load(a_block, mask=ks[None, :] < k_left, other=0.0)
            b = tl.load(b_block, mask=ks[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_block += BLOCK_SIZE_K * stride_ak
            b_block += BLOCK_SIZE_K * stride_bk
        if ACTIVATION == "leaky_relu":
            acc = leaky_relu(acc)
        c = acc.to(tl.float16)

        c_rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        c_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_block = c_ptr + stride_cm * c_rows[:, None] + stride_cn * c_cols[None, :]
        tl.store(c_block, c, mask=(c_rows[:, None] < M) & (c_cols[None, :] < N))

    return matmul_kernel


def build(autotune: Autotune, configs: list[triton.Config]) -> Any:
    kernel = make_matmul_kernel(autotune, configs)

    def matmul(a: torch.Tensor, b: torch.Tensor, activation: str = "") -> torch.Tensor:
        assert a.shape[1] == b.shape[0], "Incompatible dimensions"
        assert a.is_contiguous(), "Matrix A must be contiguous"
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), device=a.device, dtype=torch.float16)
        grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
        kernel[grid](
            a, b, c,
            M, N, K,
            a.stride(0), a.stride(1),
            b.stride(0), b.stride(1),
            c.stride(0), c.stride(1),
            ACTIVATION=activation,
        )  # fmt: skip
        return c

    return matmul


def make_inputs(size: Size, device: str) -> Inputs:
    # The tutorial's unit test: uniform in [-0.5, 0.5), fp16.
    source = generator(device)
    a = torch.rand((size["M"], size["K"]), device=device, dtype=torch.float16, generator=source) - 0.5
    b = torch.rand((size["K"], size["N"]), device=device, dtype=torch.float16, generator=source) - 0.5
    return a, b


def check(inputs: Inputs, output: torch.Tensor) -> None:
    """The tutorial's `torch.allclose(triton_output, torch_output, atol=1e-2, rtol=0)`, against the
    fp32 product rounded to fp16, plus one fp16 step of relative tolerance (2**-10): at 4096^3 the
    products reach 30, where two correct roundings may differ by 0.016 (the tutorial checks 512^2)."""
    a, b = inputs
    expected = (a.float() @ b.float()).half()
    torch.testing.assert_close(output, expected, atol=1e-2, rtol=2**-10)


def run_tutorial(module: Any, inputs: Inputs) -> torch.Tensor:
    return module.matmul(*inputs)


def cases() -> list[Case]:
    return [
        Case(
            name="03-matmul-fp16",
            summary="tutorial 03: grouped tiled GEMM, 16 configs keyed on M, N, K, fused activation",
            build=build,
            make_inputs=make_inputs,
            check=check,
            configs=tutorial_configs,
            tiny_configs=tiny_configs,
            tiny_size={"M": 48, "N": 64, "K": 48},
            sizes=({"M": 1024, "N": 1024, "K": 1024}, {"M": 4096, "N": 4096, "K": 4096}),
            tutorial=TutorialCall(
                "03-matrix-multiplication.py", run_tutorial, stop_before="torch.manual_seed(0)"
            ),
        )
    ]
