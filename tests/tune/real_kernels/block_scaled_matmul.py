# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Tutorial 10's block-scaled matmul (`tl.dot_scaled` over mxfp8 or mxfp4 operands with e8m0 scales, one
per 32 elements along K), written as the tutorial writes it: A, B (N x K), the preshuffled 5-D scales
and C all read and written through host `TensorDescriptor`s, M, N and K constexpr.

The tutorial launches one fixed config; here the kernel is under `autotune`, over the tutorial's
config and its neighbours (BLOCK_N, stages), and the descriptors are made with a placeholder block
that each config's `pre_hook` sets, as tutorial 09 does, since the block shapes depend on the config.
On NVIDIA GPUs the tutorial runs on compute capability 10 only (block-scaled tensor cores), as here.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.mxfp import MXFP4Tensor
from triton.tools.tensor_descriptor import TensorDescriptor

from tests.tune.real_kernels.base import (
    Autotune,
    Case,
    Inputs,
    Size,
    capability,
    generator,
)
from tests.tune.real_kernels.limits import interpreter_dot_scaled_problem

VEC_SIZE = 32  # elements of A or B sharing one e8m0 scale, along K (mx formats)
SCALE_ROWS = 128  # rows of A or B whose scales form one preshuffled [32, 4, 4] block


def set_block_shapes(nargs: dict[str, Any]) -> None:
    """A config's block shapes onto the descriptors, made with placeholders before a config was chosen."""
    block_m, block_n, block_k = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    rep_k = block_k // VEC_SIZE // 4
    nargs["a_desc"].block_shape = [block_m, block_k // nargs["ELEM_PER_BYTE_A"]]
    nargs["b_desc"].block_shape = [block_n, block_k // nargs["ELEM_PER_BYTE_B"]]
    # Scales as [1, rows / 128, K / 128, 2, 256] bytes: 256-byte rows keep the TMA messages large.
    nargs["a_scale_desc"].block_shape = [1, block_m // SCALE_ROWS, rep_k, 2, 256]
    nargs["b_scale_desc"].block_shape = [1, block_n // SCALE_ROWS, rep_k, 2, 256]
    nargs["c_desc"].block_shape = [block_m, block_n]


def configs_for(block_k: int, tiles: tuple[tuple[int, int], ...]) -> list[triton.Config]:
    return [
        triton.Config(
            {"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": block_k, "NUM_STAGES": stages},
            num_warps=4,
            pre_hook=set_block_shapes,
        )
        for block_n, stages in tiles
    ]


def tutorial_configs(block_k: int) -> Any:
    # The tutorial's (BLOCK_N 256, 4 stages) first, then BLOCK_N 128 and 3 to 5 stages.
    return lambda: configs_for(block_k, ((256, 4), (256, 3), (128, 4), (128, 5)))


def tiny_configs(block_k: int) -> Any:
    return lambda: configs_for(block_k, ((256, 2), (128, 2)))


def make_block_scaled_matmul_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["M", "N", "K", "ELEM_PER_BYTE_A", "ELEM_PER_BYTE_B"])
    @triton.jit
    def block_scaled_matmul_kernel(
        a_desc, a_scale_desc, b_desc, b_scale_desc, c_desc,
        M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
        output_type: tl.constexpr,
        ELEM_PER_BYTE_A: tl.constexpr, ELEM_PER_BYTE_B: tl.constexpr,
        VEC_SIZE: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        NUM_STAGES: tl.constexpr,
    ):  # fmt: skip
        if output_type == 0:
            output_dtype = tl.float32
        elif output_type == 1:
            output_dtype = tl.float16
        elif output_type == 2:
            output_dtype = tl.float8e4nv
        REP_M: tl.constexpr = BLOCK_M // 128
        REP_N: tl.constexpr = BLOCK_N // 128
        REP_K: tl.constexpr = BLOCK_K // VEC_SIZE // 4

        pid = tl.program_id(axis=0)
        pid_m = pid % tl.cdiv(M, BLOCK_M)
        pid_n = pid // tl.cdiv(M, BLOCK_M)
        a_k = 0  # in bytes: two fp4 values share one
        b_k = 0
        scale_k = 0
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for _ in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=NUM_STAGES):
            a = a_desc.load([pid_m * BLOCK_M, a_k])
            b = b_desc.load([pid_n * BLOCK_N, b_k])
            scale_a = a_scale_desc.load([0, pid_m * REP_M, scale_k, 0, 0])
            scale_b = b_scale_desc.load([0, pid_n * REP_N, scale_k, 0, 0])
            # Undo the preshuffle: [rep, rep_k, 32, 4, 4] -> [rows, K / VEC_SIZE], as dot_scaled takes them.
            scale_a = (
                scale_a.reshape(REP_M, REP_K, 32, 4, 4)
                .trans(0, 3, 2, 1, 4)
                .reshape(BLOCK_M, BLOCK_K // VEC_SIZE)
            )
            scale_b = (
                scale_b.reshape(REP_N, REP_K, 32, 4, 4)
                .trans(0, 3, 2, 1, 4)
                .reshape(BLOCK_N, BLOCK_K // VEC_SIZE)
            )
            if ELEM_PER_BYTE_A == 2 and ELEM_PER_BYTE_B == 2:
                acc = tl.dot_scaled(a, scale_a, "e2m1", b.T, scale_b, "e2m1", acc)
            else:
                acc = tl.dot_scaled(a, scale_a, "e4m3", b.T, scale_b, "e4m3", acc)
            a_k += BLOCK_K // ELEM_PER_BYTE_A
            b_k += BLOCK_K // ELEM_PER_BYTE_B
            scale_k += REP_K
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(output_dtype))

    return block_scaled_matmul_kernel


OUTPUT_TYPES = {torch.float32: 0, torch.float16: 1, torch.float8_e4m3fn: 2}


def build(autotune: Autotune, configs: list[triton.Config]) -> Any:
    kernel = make_block_scaled_matmul_kernel(autotune, configs)

    def block_scaled_matmul(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
                            M: int, N: int, K: int, fp4: bool) -> torch.Tensor:  # fmt: skip
        output = torch.empty((M, N), dtype=torch.float16, device=a.device)
        placeholder = [1, 1]
        a_desc, b_desc, c_desc = (TensorDescriptor.from_tensor(t, placeholder) for t in (a, b, output))
        a_scale_desc = TensorDescriptor.from_tensor(a_scale, [1, 1, 1, 1, 1])
        b_scale_desc = TensorDescriptor.from_tensor(b_scale, [1, 1, 1, 1, 1])

        def grid(META: dict[str, Any]) -> tuple[int, int]:
            return (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]), 1)

        kernel[grid](
            a_desc, a_scale_desc, b_desc, b_scale_desc, c_desc, M, N, K, OUTPUT_TYPES[output.dtype],
            2 if fp4 else 1, 2 if fp4 else 1, VEC_SIZE,
        )  # fmt: skip
        return output

    return block_scaled_matmul


def preshuffle(scales: torch.Tensor) -> torch.Tensor:
    """[rows, K / 32] scales -> the 5-D [1, rows / 128, K / 128, 2, 256] layout the kernel loads: within a
    block of 128 rows and 4 scale columns, row r and column c at byte (r % 32) * 16 + (r // 32) * 4 + c."""
    rows, columns = scales.shape
    blocks = scales.reshape(rows // SCALE_ROWS, 4, 32, columns // 4, 4).permute(0, 3, 2, 1, 4)
    return blocks.contiguous().reshape(1, rows // SCALE_ROWS, columns // 4, 2, 256)


def make_inputs(fp4: bool) -> Any:
    def inputs(size: Size, device: str) -> Inputs:
        M, N, K = size["M"], size["N"], size["K"]
        source = generator(device, 42)
        torch.manual_seed(42)  # MXFP4Tensor.random draws from the global generator
        a_values = MXFP4Tensor(size=(M, K), device=device).random()
        b_values = MXFP4Tensor(size=(N, K), device=device).random()  # B is N x K: "col-major" K x N
        if fp4:
            a, b = a_values.to_packed_tensor(dim=1), b_values.to_packed_tensor(dim=1)
        else:
            a, b = (
                a_values.to(torch.float32).to(torch.float8_e4m3fn),
                b_values.to(torch.float32).to(torch.float8_e4m3fn),
            )
        # e8m0 exponents around 127 (scales 1/8 to 8).
        a_exponents = torch.randint(
            124, 131, (M, K // VEC_SIZE), dtype=torch.uint8, device=device, generator=source
        )
        b_exponents = torch.randint(
            124, 131, (N, K // VEC_SIZE), dtype=torch.uint8, device=device, generator=source
        )
        references = (a_values.to(torch.float32), a_exponents, b_values.to(torch.float32), b_exponents)
        return (a, preshuffle(a_exponents), b, preshuffle(b_exponents), M, N, K, fp4, references)

    return inputs


def ignoring_reference(operation: Any) -> Any:
    """The operation on a case's inputs, whose last item is what the check computes its reference from."""
    return lambda *inputs: operation(*inputs[:-1])


def check(inputs: Inputs, output: torch.Tensor) -> None:
    """The tutorial's: within atol 1e-3 and rtol 1e-3 of (A * scale_A) @ (B * scale_B)^T in fp32."""
    a, a_exponents, b, b_exponents = inputs[-1]
    a_scale = torch.exp2(a_exponents.float() - 127).repeat_interleave(VEC_SIZE, dim=1)
    b_scale = torch.exp2(b_exponents.float() - 127).repeat_interleave(VEC_SIZE, dim=1)
    expected = (a * a_scale) @ (b * b_scale).T
    torch.testing.assert_close(output.to(torch.float32), expected, atol=1e-3, rtol=1e-3)


def unsupported(device: str) -> str | None:
    cc = capability(device)
    if cc is not None and cc[0] != 10:
        return (
            f"tutorial 10 runs on compute capability 10 only (block-scaled tensor cores; its "
            f"`supports_block_scaling`), this GPU has {cc[0]}.{cc[1]}"
        )
    return interpreter_dot_scaled_problem() if cc is None else None


def cases() -> list[Case]:
    found = []
    for name, fp4, block_k in (("mxfp8", False, 128), ("mxfp4", True, 256)):
        found.append(
            Case(
                name=f"10-block-scaled-matmul-{name}",
                summary=f"tutorial 10: tl.dot_scaled in {name}, 5-D preshuffled scales through host descriptors",
                build=lambda autotune, configs: ignoring_reference(build(autotune, configs)),
                make_inputs=make_inputs(fp4),
                check=check,
                configs=tutorial_configs(block_k),
                tiny_configs=tiny_configs(block_k),
                tiny_size={"M": 128, "N": 256, "K": 2 * block_k},
                sizes=({"M": 8192, "N": 8192, "K": 8192},),
                unsupported=unsupported,
            )
        )
    return found
