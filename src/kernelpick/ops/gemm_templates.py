"""The built-in Triton GEMM templates: tiled (2-D and batched), persistent TMA, and skinny for decode."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import torch

from kernelpick.device import Requirements
from kernelpick.errors import TemplateError
from kernelpick.select.template import GridContext, TritonTemplate
from kernelpick.tensors import TensorSpec


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _output(a: TensorSpec, b: TensorSpec) -> tuple[Sequence[int], torch.dtype]:
    if a.ndim == 3:
        return (a.size[0], a.size[1], b.size[2]), a.dtype
    return (a.size[0], b.size[1]), a.dtype


def _gated_output(a: TensorSpec, b: TensorSpec, b_up: TensorSpec) -> tuple[Sequence[int], torch.dtype]:
    return _output(a, b)


def _tiles(context: GridContext) -> int:
    m, n = context.output.size[-2:]
    return _cdiv(m, context.meta["BLOCK_M"]) * _cdiv(n, context.meta["BLOCK_N"])


def _gemm_grid(context: GridContext) -> tuple[int, ...]:
    batch = context.output.size[0] if context.output.ndim == 3 else 1
    return (_tiles(context), batch)


def _skinny_grid(context: GridContext) -> tuple[int, ...]:
    batch = context.output.size[0] if context.output.ndim == 3 else 1
    return (_tiles(context), int(context.meta["SPLIT_K"]), batch)


def _persistent_grid(context: GridContext) -> tuple[int, ...]:
    return (max(1, min(int(context.meta["NUM_SMS"]), _tiles(context))),)


# The dot of the main loop: TF32 for float32 only where torch allows it.
_DOT = """{% if dtype("A") == "tl.float32" %}
{% set precision = ', input_precision="tf32"' if ALLOW_TF32 else ', input_precision="ieee"' %}
{% else %}
{% set precision = "" %}
{% endif %}"""

GEMM_SOURCE = (
    _DOT
    + """
{% set batched = inputs.A.ndim == 3 %}
{% set d = 1 if batched else 0 %}
{% set gated = gate is defined %}
{% set EVEN_K = size_hint("A", d + 1) % BLOCK_K == 0 %}
{{ def_kernel() }}
    M = {{ size("A", d) }}
    N = {{ size("B", d + 1) }}
    K = {{ size("A", d + 1) }}
    stride_am = {{ stride("A", d) }}
    stride_ak = {{ stride("A", d + 1) }}
    stride_bk = {{ stride("B", d) }}
    stride_bn = {{ stride("B", d + 1) }}
{% if gated %}
    stride_uk = {{ stride("B_UP", d) }}
    stride_un = {{ stride("B_UP", d + 1) }}
{% endif %}
    pid = tl.program_id(0)
{% if batched %}
    idx_b = tl.program_id(1)
    A = A + idx_b * {{ stride("A", 0) }}
    B = B + idx_b * {{ stride("B", 0) }}
{% if gated %}
    B_UP = B_UP + idx_b * {{ stride("B_UP", 0) }}
{% endif %}
{% endif %}
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
{% if size_hint("A", d) % BLOCK_M == 0 %}
    ram = tl.max_contiguous(tl.multiple_of(rm, BLOCK_M), BLOCK_M)
{% else %}
    ram = rm % M
{% endif %}
{% if size_hint("B", d + 1) % BLOCK_N == 0 %}
    rbn = tl.max_contiguous(tl.multiple_of(rn, BLOCK_N), BLOCK_N)
{% else %}
    rbn = rn % N
{% endif %}
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak)
    b_ptrs = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{% if gated %}
    # gated: each tile of A is read once for the matching tiles of both B matrices
    b_up_ptrs = B_UP + (rk[:, None] * stride_uk + rbn[None, :] * stride_un)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{% endif %}
    for k in range(0, tl.cdiv(K, BLOCK_K)):
{% if EVEN_K %}
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
{% if gated %}
        b_up = tl.load(b_up_ptrs)
{% endif %}
{% else %}
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
{% if gated %}
        b_up = tl.load(b_up_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
{% endif %}
{% endif %}
        acc = tl.dot(a, b, acc{{ precision }})
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
{% if gated %}
        acc_up = tl.dot(a, b_up, acc_up{{ precision }})
        b_up_ptrs += BLOCK_K * stride_uk
{% endif %}
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
{% if gated %}
    # the gate's activation times the up projection: the output is written once
    acc = ({{ gate }}) * acc_up
{% endif %}
{% if batched %}
    {{ store_output(("idx_b", "idx_m", "idx_n"), "acc", "mask") }}
{% else %}
    {{ store_output(("idx_m", "idx_n"), "acc", "mask") }}
{% endif %}
"""
)

PERSISTENT_TMA_SOURCE = (
    _DOT
    + """
{% set a_rows = stride_hint("A", 1) == 1 %}
{% set b_rows = stride_hint("B", 1) == 1 %}
{% if a_rows %}
{% set a_desc = tensor_descriptor("A", ["BLOCK_M", "BLOCK_K"]) %}
{% else %}
{% set a_desc = tensor_descriptor("A", ["BLOCK_K", "BLOCK_M"], permute=[1, 0]) %}
{% endif %}
{% if b_rows %}
{% set b_desc = tensor_descriptor("B", ["BLOCK_K", "BLOCK_N"]) %}
{% else %}
{% set b_desc = tensor_descriptor("B", ["BLOCK_N", "BLOCK_K"], permute=[1, 0]) %}
{% endif %}
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
{% if a_rows %}
            a = {{ a_desc }}.load([offs_am, offs_k])
{% else %}
            a = {{ a_desc }}.load([offs_k, offs_am]).T
{% endif %}
{% if b_rows %}
            b = {{ b_desc }}.load([offs_k, offs_bn])
{% else %}
            b = {{ b_desc }}.load([offs_bn, offs_k]).T
{% endif %}
            acc = tl.dot(a, b, acc{{ precision }})
        idx_m = (offs_am + tl.arange(0, BLOCK_M))[:, None]
        idx_n = (offs_bn + tl.arange(0, BLOCK_N))[None, :]
        mask = (idx_m < M) & (idx_n < N)
        {{ store_output(("idx_m", "idx_n"), "acc", "mask") }}
"""
)

SKINNY_SOURCE = (
    _DOT
    + """
{% set batched = inputs.A.ndim == 3 %}
{% set d = 1 if batched else 0 %}
{% set gated = gate is defined %}
{# gated: the partial sums of both products go to the workspace, and the reduction adds each before
   the activation #}
{% set parts = 2 if gated else 1 %}
{% set rows = size_hint("A", d) %}
{% set depth = size_hint("A", d + 1) %}
{% set columns = size_hint("B", d + 1) %}
{% set batch = size_hint("A", 0) if batched else 1 %}
{# 16 rows: tl.dot; fewer: each row's products summed by CUDA cores, one line per row #}
{% set dot = BLOCK_M >= 16 %}
{% set along_k = stride_hint("B", d) == 1 and stride_hint("B", d + 1) != 1 %}
{% set unrolled = BLOCK_M if rows > BLOCK_M else rows %}
{# the GEMV form streams B, read once, past the caches and keeps A, read by every program: the
   fastest config without it ran 4-12 % slower on an H100 at M = 1 and 4 (bench/results/gemv_sweep-h100.json) #}
{% set b_policy = ', eviction_policy="evict_first"' %}
{% set a_policy = ', eviction_policy="evict_last"' %}
{# each of a tile's SPLIT_K programs sums its own K_SPLIT of K, a multiple of BLOCK_K #}
{% set K_SPLIT = ((depth + SPLIT_K * BLOCK_K - 1) // (SPLIT_K * BLOCK_K)) * BLOCK_K %}
{% set EVEN_K = depth % (SPLIT_K * BLOCK_K) == 0 %}
{% set EVEN_M = rows % BLOCK_M == 0 %}
{% set partials = parts * SPLIT_K * batch * rows * columns %}
{{ def_kernel() }}
    M = {{ size("A", d) }}
    N = {{ size("B", d + 1) }}
    K = {{ size("A", d + 1) }}
    stride_am = {{ stride("A", d) }}
    stride_ak = {{ stride("A", d + 1) }}
    stride_bk = {{ stride("B", d) }}
    stride_bn = {{ stride("B", d + 1) }}
{% if gated %}
    stride_uk = {{ stride("B_UP", d) }}
    stride_un = {{ stride("B_UP", d + 1) }}
{% endif %}
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
{% if batched %}
    idx_b = tl.program_id(2)
    A = A + idx_b * {{ stride("A", 0) }}
    B = B + idx_b * {{ stride("B", 0) }}
{% if gated %}
    B_UP = B_UP + idx_b * {{ stride("B_UP", 0) }}
{% endif %}
{% endif %}
    # one program per (row block, column block, K slice); at decode sizes one row block holds all of M
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
{% if int64_index %}
    rm = rm.to(tl.int64)
    rn = rn.to(tl.int64)
{% endif %}
{% if columns % BLOCK_N == 0 %}
    rbn = tl.max_contiguous(tl.multiple_of(rn, BLOCK_N), BLOCK_N)
{% else %}
    rbn = rn % N
{% endif %}
    rk = pid_k * {{ K_SPLIT }} + tl.arange(0, BLOCK_K)
{% if int64_index %}
    rk = rk.to(tl.int64)
{% endif %}
    b_ptrs = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn)
{% if gated %}
    b_up_ptrs = B_UP + (rk[:, None] * stride_uk + rbn[None, :] * stride_un)
{% endif %}
{% if dot %}
{% if EVEN_M %}
    ram = rm
{% else %}
    ram = rm % M
{% endif %}
    a_ptrs = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{% if gated %}
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{% endif %}
    for k in range(0, {{ K_SPLIT // BLOCK_K }}):
{% if EVEN_K %}
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
{% if gated %}
        b_up = tl.load(b_up_ptrs)
{% endif %}
{% else %}
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
{% if gated %}
        b_up = tl.load(b_up_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
{% endif %}
{% endif %}
        acc = tl.dot(a, b, acc{{ precision }})
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
{% if gated %}
        acc_up = tl.dot(a, b_up, acc_up{{ precision }})
        b_up_ptrs += BLOCK_K * stride_uk
{% endif %}
{% else %}
    first_row = pid_m * BLOCK_M
{% if int64_index %}
    first_row = first_row.to(tl.int64)
{% endif %}
    # each row's products are summed along K only after the loop, as Inductor's reductions do: the
    # loop itself is loads and FMAs, no shuffles between threads
{% if along_k %}
    # B's tile is read along K: a row of A is read as a tile of B's shape (the same value for every
    # column, from L1), so that it has B's layout: a vector would be moved through shared memory
    # into that layout at every step
    a_offsets = rk[:, None] * stride_ak + 0 * rbn[None, :]
{% else %}
    a_offsets = rk * stride_ak
{% endif %}
{% for i in range(unrolled) %}
{% if EVEN_M %}
    a_ptrs_{{ i }} = A + (first_row + {{ i }}) * stride_am + a_offsets
{% else %}
    a_ptrs_{{ i }} = A + ((first_row + {{ i }}) % M) * stride_am + a_offsets
{% endif %}
    acc_{{ i }} = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
{% if gated %}
    acc_up_{{ i }} = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
{% endif %}
{% endfor %}
    for k in range(0, {{ K_SPLIT // BLOCK_K }}):
{% if EVEN_K %}
        b = tl.load(b_ptrs{{ b_policy }}).to(tl.float32)
{% if gated %}
        b_up = tl.load(b_up_ptrs{{ b_policy }}).to(tl.float32)
{% endif %}
{% else %}
        k_mask = rk < K - k * BLOCK_K
        b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0{{ b_policy }}).to(tl.float32)
{% if gated %}
        b_up = tl.load(b_up_ptrs, mask=k_mask[:, None], other=0.0{{ b_policy }}).to(tl.float32)
{% endif %}
{% endif %}
{% for i in range(unrolled) %}
{% if EVEN_K %}
        a_{{ i }} = tl.load(a_ptrs_{{ i }}{{ a_policy }}).to(tl.float32)
{% elif along_k %}
        a_{{ i }} = tl.load(a_ptrs_{{ i }}, mask=k_mask[:, None], other=0.0{{ a_policy }}).to(tl.float32)
{% else %}
        a_{{ i }} = tl.load(a_ptrs_{{ i }}, mask=k_mask, other=0.0{{ a_policy }}).to(tl.float32)
{% endif %}
{% if along_k %}
        acc_{{ i }} += a_{{ i }} * b
{% if gated %}
        acc_up_{{ i }} += a_{{ i }} * b_up
{% endif %}
{% else %}
        acc_{{ i }} += a_{{ i }}[:, None] * b
{% if gated %}
        acc_up_{{ i }} += a_{{ i }}[:, None] * b_up
{% endif %}
{% endif %}
        a_ptrs_{{ i }} += BLOCK_K * stride_ak
{% endfor %}
        b_ptrs += BLOCK_K * stride_bk
{% if gated %}
        b_up_ptrs += BLOCK_K * stride_uk
{% endif %}
    row = tl.arange(0, BLOCK_M)[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{% if gated %}
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{% endif %}
{% for i in range(unrolled) %}
    acc = tl.where(row == {{ i }}, tl.sum(acc_{{ i }}, axis=0)[None, :], acc)
{% if gated %}
    acc_up = tl.where(row == {{ i }}, tl.sum(acc_up_{{ i }}, axis=0)[None, :], acc_up)
{% endif %}
{% endfor %}
{% endif %}
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
{% if SPLIT_K == 1 %}
{% if gated %}
    # the gate's activation times the up projection: the output is written once
    acc = ({{ gate }}) * acc_up
{% endif %}
{% if batched %}
    {{ store_output(("idx_b", "idx_m", "idx_n"), "acc", "mask") }}
{% else %}
    {{ store_output(("idx_m", "idx_n"), "acc", "mask") }}
{% endif %}
{% else %}
{% set ws = workspace("WS", [parts * SPLIT_K, batch, rows, columns]) %}
{% if partials >= 2 ** 31 %}
    pid_k = pid_k.to(tl.int64)
{% endif %}
    # this program's partial sums: the reduction kernel adds them in a fixed order
    partial = {{ ws }} + pid_k * {{ batch * rows * columns }} + idx_m * {{ columns }} + idx_n
{% if batched %}
    partial += idx_b * {{ rows * columns }}
{% endif %}
    tl.store(partial, acc, mask=mask)
{% if gated %}
    tl.store(partial + {{ SPLIT_K * batch * rows * columns }}, acc_up, mask=mask)
{% endif %}
{% set R_N = [16, 512 // BLOCK_M] | max %}
{% set r_blocks = ((rows + BLOCK_M - 1) // BLOCK_M) * ((columns + R_N - 1) // R_N) %}


{{ def_kernel("reduce", grid=[r_blocks, batch], num_warps=4, num_stages=1) }}
    M = {{ size("A", d) }}
    N = {{ size("B", d + 1) }}
    pid = tl.program_id(0)
{% if batched %}
    idx_b = tl.program_id(1)
{% endif %}
    num_pid_n = tl.cdiv(N, {{ R_N }})
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * {{ R_N }} + tl.arange(0, {{ R_N }})
{% if int64_index or partials >= 2 ** 31 %}
    rm = rm.to(tl.int64)
    rn = rn.to(tl.int64)
{% endif %}
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    partial = {{ ws }} + idx_m * {{ columns }} + idx_n
{% if batched %}
    partial += idx_b * {{ rows * columns }}
{% endif %}
    # split 0, 1, 2, ... in this order whichever program finished first: the same sums every call
    acc = tl.load(partial, mask=mask, other=0.0)
    for split in tl.static_range(1, SPLIT_K):
        acc += tl.load(partial + split * {{ batch * rows * columns }}, mask=mask, other=0.0)
{% if gated %}
    # the up projection's sums, after the gate's: each product is summed whole before the activation
    acc_up = tl.load(partial + {{ SPLIT_K * batch * rows * columns }}, mask=mask, other=0.0)
    for split in tl.static_range(SPLIT_K + 1, 2 * SPLIT_K):
        acc_up += tl.load(partial + split * {{ batch * rows * columns }}, mask=mask, other=0.0)
    acc = ({{ gate }}) * acc_up
{% endif %}
{% if batched %}
    {{ store_output(("idx_b", "idx_m", "idx_n"), "acc", "mask") }}
{% else %}
    {{ store_output(("idx_m", "idx_n"), "acc", "mask") }}
{% endif %}
{% endif %}
"""
)

#: C = A @ B (2-D) or a batched product (3-D), tiled, with grouped program order.
GEMM = TritonTemplate("kernelpick_gemm", GEMM_SOURCE, inputs=("A", "B"), output=_output, grid=_gemm_grid)

#: C = A @ B (2-D or batched) for few rows, streaming B once: every program takes all of M (BLOCK_M
#: rows, 16 with tl.dot, fewer as a GEMV whose rows are unrolled), BLOCK_N columns and, with
#: SPLIT_K > 1, one of SPLIT_K slices of K, whose float32 partial sums a second kernel adds in a fixed
#: order (deterministic, as cuBLAS's split-K reduction and Inductor's decompose-K are) before the epilogue.
SKINNY_GEMM = TritonTemplate(
    "kernelpick_gemm_skinny", SKINNY_SOURCE, inputs=("A", "B"), output=_output, grid=_skinny_grid
)

#: C = A @ B (2-D) by a persistent kernel reading A and B through TMA tensor descriptors: only on
#: sm_90 and newer GPUs, with a Triton that has host tensor descriptors (skipped elsewhere, saying why).
PERSISTENT_TMA_GEMM = TritonTemplate(
    "kernelpick_gemm_tma",
    PERSISTENT_TMA_SOURCE,
    inputs=("A", "B"),
    output=_output,
    grid=_persistent_grid,
    requires=Requirements(tma=True),
)


@functools.cache
def gated(template: TritonTemplate, activation: str, expression: str) -> TritonTemplate:
    """`GEMM` or `SKINNY_GEMM` as C = activation(A @ B) * (A @ B_UP), `gated_mm`'s product: each tile of
    A read once for both B matrices, two float32 sums (split-K: both summed whole before the
    activation), and `expression` (Triton, over `acc`) applied to the first before the one store.

    Raises:
        TemplateError: `template` has no gated form (the persistent TMA template).
    """
    if "{% set gated = gate is defined %}" not in template.source:
        raise TemplateError(f"template `{template.name}` has no gated form; GEMM and SKINNY_GEMM have one")
    return TritonTemplate(
        f"{template.name}_gated_{activation}",
        "{% set gate = " + json.dumps(expression) + " %}\n" + template.source,
        inputs=("A", "B", "B_UP"),
        output=_gated_output,
        grid=template.grid_rule,
        requires=template.requires,
    )
