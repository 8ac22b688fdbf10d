"""The fp8 GEMM templates of `kernelpick.ops.scaled_mm`: a tiled kernel and a persistent TMA kernel."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from kernelpick.device import Requirements
from kernelpick.select.template import GridContext, OutputRule, TritonTemplate
from kernelpick.tensors import TensorSpec

#: The names of the templates' inputs, in kernel-parameter order.
INPUTS = ("A", "B", "SCALE_A", "SCALE_B")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tiles(context: GridContext) -> int:
    m, n = context.output.size
    return _cdiv(m, context.meta["BLOCK_M"]) * _cdiv(n, context.meta["BLOCK_N"])


def _tiled_grid(context: GridContext) -> tuple[int, ...]:
    return (_tiles(context),)


def _persistent_grid(context: GridContext) -> tuple[int, ...]:
    return (max(1, min(int(context.meta["NUM_SMS"]), _tiles(context))),)


# The main loop's step. Both templates compute `(A @ B) * scale_a * scale_b` accumulating in float32.
# `FAST_ACCUM` (a constant: torch's `use_fast_accum`) decides how: on sm_90 an fp8
# `tl.dot(a, b, acc)` adds each product into the tensor cores' accumulator, which keeps fewer bits
# than float32 (Triton's `max_num_imprecise_acc` default for fp8 there is 2**30: never promoted).
# `acc += tl.dot(a, b)` sums each BLOCK_K slice from zero and adds it to `acc` in float32: Triton does
# not fold that addition into the dot for fp8 operands on sm_90 (its `CombineDotAddFPattern` skips
# dots with imprecise accumulation), so precision is lost within one slice only. That is what
# `use_fast_accum=False` asks of torch, and the default.
_ACCUMULATE = """{% if FAST_ACCUM %}
{% set accumulate = "acc = tl.dot(a, b, acc)" %}
{% else %}
{% set accumulate = "acc += tl.dot(a, b)" %}
{% endif %}"""

# The scales, applied to the float32 accumulator before the epilogue (bias) and the store; `rm` and
# `rn` are the tile's rows and columns, M and N the sizes. A per-row `scale_a` is (M, 1) and a
# per-column `scale_b` (1, N); one value each otherwise (size [], [1] or [1, 1]).
_SCALE = """
{% if inputs.SCALE_A.numel > 1 %}
    scale_a = tl.load(SCALE_A + rm * {{ stride("SCALE_A", 0) }}, mask=rm < M, other=0.0)[:, None]
{% else %}
    scale_a = tl.load(SCALE_A)
{% endif %}
{% if inputs.SCALE_B.numel > 1 %}
    scale_b = tl.load(SCALE_B + rn * {{ stride("SCALE_B", 1) }}, mask=rn < N, other=0.0)[None, :]
{% else %}
    scale_b = tl.load(SCALE_B)
{% endif %}
    acc = acc * scale_a * scale_b"""

SCALED_GEMM_SOURCE = (
    _ACCUMULATE
    + """
{% set EVEN_K = size_hint("A", 1) % BLOCK_K == 0 %}
{{ def_kernel() }}
    M = {{ size("A", 0) }}
    N = {{ size("B", 1) }}
    K = {{ size("A", 1) }}
    stride_am = {{ stride("A", 0) }}
    stride_ak = {{ stride("A", 1) }}
    stride_bk = {{ stride("B", 0) }}
    stride_bn = {{ stride("B", 1) }}
    pid = tl.program_id(0)
    # grouped ordering: GROUP_M row-blocks share the same column-blocks of B while they are in L2
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
{% if int64_index %}
    rm = rm.to(tl.int64)
    rn = rn.to(tl.int64)
{% endif %}
{% if size_hint("A", 0) % BLOCK_M == 0 %}
    ram = tl.max_contiguous(tl.multiple_of(rm, BLOCK_M), BLOCK_M)
{% else %}
    ram = rm % M
{% endif %}
{% if size_hint("B", 1) % BLOCK_N == 0 %}
    rbn = tl.max_contiguous(tl.multiple_of(rn, BLOCK_N), BLOCK_N)
{% else %}
    rbn = rn % N
{% endif %}
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak)
    b_ptrs = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
{% if EVEN_K %}
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
{% else %}
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
{% endif %}
        {{ accumulate }}
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
"""
    + _SCALE
    + """
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    {{ store_output(("idx_m", "idx_n"), "acc", "mask") }}
"""
)

# A is row-major and B column-major (`W.t()` of a row-major W), as torch._scaled_mm takes them: B is
# read as the rows of W, (BLOCK_N, BLOCK_K) tiles, K-major as the fp8 wgmma wants both operands.
PERSISTENT_TMA_SCALED_GEMM_SOURCE = (
    _ACCUMULATE
    + """
{% set a_desc = tensor_descriptor("A", ["BLOCK_M", "BLOCK_K"]) %}
{% set b_desc = tensor_descriptor("B", ["BLOCK_N", "BLOCK_K"], permute=[1, 0]) %}
{{ def_kernel() }}
    M = {{ size("A", 0) }}
    N = {{ size("B", 1) }}
    K = {{ size("A", 1) }}
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
{% if inputs.SCALE_A.numel == 1 %}
    tensor_scale_a = tl.load(SCALE_A)
{% endif %}
{% if inputs.SCALE_B.numel == 1 %}
    tensor_scale_b = tl.load(SCALE_B)
{% endif %}
    # each program walks the output tiles start_pid, start_pid + NUM_SMS, ... in grouped order
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = {{ a_desc }}.load([offs_am, offs_k])
            b = {{ b_desc }}.load([offs_bn, offs_k]).T
            {{ accumulate }}
        rm = offs_am + tl.arange(0, BLOCK_M)
        rn = offs_bn + tl.arange(0, BLOCK_N)
{% if inputs.SCALE_A.numel > 1 %}
        scale_a = tl.load(SCALE_A + rm * {{ stride("SCALE_A", 0) }}, mask=rm < M, other=0.0)[:, None]
{% else %}
        scale_a = tensor_scale_a
{% endif %}
{% if inputs.SCALE_B.numel > 1 %}
        scale_b = tl.load(SCALE_B + rn * {{ stride("SCALE_B", 1) }}, mask=rn < N, other=0.0)[None, :]
{% else %}
        scale_b = tensor_scale_b
{% endif %}
        acc = acc * scale_a * scale_b
        idx_m = rm[:, None]
        idx_n = rn[None, :]
        mask = (idx_m < M) & (idx_n < N)
        {{ store_output(("idx_m", "idx_n"), "acc", "mask") }}
"""
)

#: The output dtypes the templates write, by the suffix of their names.
# One template per output dtype: a template's output dtype is a function of its inputs only.
OUT_DTYPES: dict[torch.dtype, str] = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


def _output_rule(out_dtype: torch.dtype) -> OutputRule:
    def output(
        a: TensorSpec, b: TensorSpec, scale_a: TensorSpec, scale_b: TensorSpec
    ) -> tuple[Sequence[int], torch.dtype]:
        return (a.size[0], b.size[1]), out_dtype

    return output


@functools.cache
def scaled_gemm(out_dtype: torch.dtype) -> TritonTemplate:
    """The tiled fp8 template writing `out_dtype` (bf16, fp16 or fp32), with grouped program order."""
    return TritonTemplate(
        f"kernelpick_scaled_gemm_{OUT_DTYPES[out_dtype]}",
        SCALED_GEMM_SOURCE,
        inputs=INPUTS,
        output=_output_rule(out_dtype),
        grid=_tiled_grid,
    )


@functools.cache
def persistent_tma_scaled_gemm(out_dtype: torch.dtype) -> TritonTemplate:
    """The persistent fp8 template writing `out_dtype`, reading A and B through TMA tensor descriptors:
    only on sm_90 and newer GPUs, with a Triton that has host tensor descriptors."""
    return TritonTemplate(
        f"kernelpick_scaled_gemm_tma_{OUT_DTYPES[out_dtype]}",
        PERSISTENT_TMA_SCALED_GEMM_SOURCE,
        inputs=INPUTS,
        output=_output_rule(out_dtype),
        grid=_persistent_grid,
        requires=Requirements(tma=True),
    )
