"""Kernels written the way Liger-Kernel and unsloth write theirs (our own code, written for the tests).

What they share with those projects, and what Triton's interpreter alone does not run: float
arguments used as the fp32 scalars they are on a GPU (`eps.to(tl.float32)`, `1 - label_smoothing`),
libdevice imported by name or as a module (`rsqrt`, `tanh`), builtins under other names at module
level (`triton_cast = tl.cast`, here and in a helper's module), `tl.math` calls, `tl.constexpr` flags
and module-level constants.
"""

from __future__ import annotations

import triton
import triton.language as tl

try:  # as Liger-Kernel imports it, with its fallback for containers without the dispatching module
    from triton.language.extra.libdevice import rsqrt, tanh
except ModuleNotFoundError:  # pragma: no cover
    from triton.language.extra.cuda.libdevice import rsqrt, tanh
from triton.language.extra import libdevice
from triton.language.math import rsqrt as math_rsqrt  # a builtin, as Triton 2 kernels imported it

from tests.compile import gpu_style_helpers as helpers

# As unsloth's kernels/utils.py names them for Triton 3.
triton_tanh = libdevice.tanh
triton_cast = tl.cast

_CASTING_MODE_NONE: tl.constexpr = tl.constexpr(-1)
_CASTING_MODE_LLAMA: tl.constexpr = tl.constexpr(0)
ROPE_GROUP_SIZE: tl.constexpr = 4


@triton.jit
def liger_rms_norm_kernel(
    Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, RSTD_ptr, n_cols, eps, offset,
    casting_mode: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    """y = x * rsqrt(mean(x^2) + eps) * (offset + w), one row per program; rstd kept for the backward pass."""
    row_idx = tl.program_id(0).to(tl.int64)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    X_row = tl.load(X_ptr + row_idx * X_row_stride + col_offsets, mask=mask, other=0)
    X_row_dtype = X_row.dtype
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    if casting_mode == _CASTING_MODE_LLAMA:
        X_row = X_row.to(tl.float32)
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    rstd = rsqrt(mean_square + eps)
    tl.store(RSTD_ptr + row_idx, rstd)
    X_row = X_row * rstd
    if casting_mode == _CASTING_MODE_LLAMA:
        X_row = X_row.to(X_row_dtype)
    Y_row = X_row * (offset + W_row)
    tl.store(Y_ptr + row_idx * Y_row_stride + col_offsets, Y_row, mask=mask)


@triton.jit
def liger_layer_norm_kernel(
    Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, B_ptr, Mean_ptr, RSTD_ptr, n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y_ptr += row_idx * Y_row_stride
    X_ptr += row_idx * X_row_stride
    X_row = tl.load(X_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    B_row = tl.load(B_ptr + col_offsets, mask=mask, other=0)
    mean = tl.sum(X_row, axis=0) / n_cols
    Xmu = tl.where(mask, X_row - mean, 0.0)
    var = tl.sum(Xmu * Xmu, axis=0) / n_cols
    rstd = math_rsqrt(var + eps.to(tl.float32))
    tl.store(Mean_ptr + row_idx, mean)
    tl.store(RSTD_ptr + row_idx, rstd)
    Y_row = Xmu * rstd * W_row + B_row
    tl.store(Y_ptr + col_offsets, Y_row.to(X_row.dtype), mask=mask)


@triton.jit
def liger_swiglu_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = helpers.silu(a_row).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


@triton.jit
def liger_geglu_tanh_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a += program_id * stride
    b += program_id * stride
    c += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + col_offsets, mask=mask, other=0)
    sqrt_2_over_pi = 0.7978845608028654  # sqrt(2 / pi)
    a_cubed = a_row * a_row * a_row
    tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
    tanh_result = tanh(tanh_arg)
    geglu_a = 0.5 * a_row * (1 + tanh_result)
    c_row = geglu_a.cast(b_row.dtype) * b_row
    tl.store(c + col_offsets, c_row, mask=mask)


@triton.jit
def liger_cross_entropy_kernel(
    X_ptr, X_stride, Y_ptr, loss_ptr, n_cols, n_non_ignore, ignore_index, label_smoothing, softcap,
    REDUCTION: tl.constexpr, HAS_SOFTCAPPING: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    """The loss of each row, and its gradient written over the row's logits (in place), with an online
    softmax over blocks of BLOCK_SIZE columns."""
    program_id = tl.program_id(0).to(tl.int64)
    X_ptr += program_id * X_stride
    y = tl.load(Y_ptr + program_id)
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        tl.store(loss_ptr + program_id, 0.0)
        return
    m = float("-inf")
    d = 0.0
    ori_X_y = tl.load(X_ptr + y).cast(tl.float32)
    if HAS_SOFTCAPPING:
        ori_X_y = softcap * tanh(ori_X_y / softcap)
    scaled_x_sum = 0.0
    eps = label_smoothing / n_cols
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
        if HAS_SOFTCAPPING:
            X_block = softcap * tanh(X_block / softcap)
        block_max = tl.max(X_block)
        if label_smoothing > 0:
            scaled_x_sum += tl.sum(tl.where(X_offsets < n_cols, -eps * X_block, 0.0))
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    lse = m + tl.log(d)
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
        if HAS_SOFTCAPPING:
            intermediate = tanh(X_block / softcap)
            X_block = softcap * intermediate
        X_block = tl.exp(X_block - lse) - eps
        X_block = tl.where(X_offsets == y, X_block - (1 - label_smoothing), X_block)
        if HAS_SOFTCAPPING:
            X_block = X_block * (1 - intermediate * intermediate)
        if REDUCTION == "mean":
            X_block = X_block / n_non_ignore
        tl.store(X_ptr + X_offsets, X_block, mask=X_offsets < n_cols)
    loss = lse - ori_X_y
    if label_smoothing > 0:
        loss = loss * (1 - label_smoothing) + scaled_x_sum + label_smoothing * lse
    if REDUCTION == "mean":
        loss = loss / n_non_ignore
    tl.store(loss_ptr + program_id, loss)


@triton.jit
def unsloth_rope_kernel(
    Q, Q_row_stride, cos, cos_row_stride, sin, sin_row_stride, seqlen,
    head_dim: tl.constexpr, n_heads: tl.constexpr, BACKWARD_PASS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    """Rotates the halves of each head of Q in place, ROPE_GROUP_SIZE heads per program."""
    row_position = tl.program_id(0)
    group_head_position = tl.program_id(1)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    half_head_dim = head_dim // 2
    mask = col_offsets < half_head_dim
    sin1 = tl.load(sin + (row_position % seqlen) * sin_row_stride + col_offsets, mask=mask, other=0)
    cos1 = tl.load(cos + (row_position % seqlen) * cos_row_stride + col_offsets, mask=mask, other=0)
    if BACKWARD_PASS:
        sin1 = -sin1
    head_start = group_head_position * ROPE_GROUP_SIZE
    head_end = min((head_start + ROPE_GROUP_SIZE), n_heads)
    for k in range(head_start, head_end):
        offs_q1 = row_position * Q_row_stride + k * head_dim + col_offsets
        offs_q2 = row_position * Q_row_stride + k * head_dim + col_offsets + half_head_dim
        Q1 = tl.load(Q + offs_q1, mask=mask, other=0).to(sin1.dtype)
        Q2 = tl.load(Q + offs_q2, mask=mask, other=0).to(sin1.dtype)
        tl.store(Q + offs_q1, Q1 * cos1 - Q2 * sin1, mask=mask)
        tl.store(Q + offs_q2, Q2 * cos1 + Q1 * sin1, mask=mask)


@triton.jit
def unsloth_gemma_rms_norm_kernel(
    Y, Y_row_stride, X, X_row_stride, W, W_row_stride, r, r_row_stride: tl.constexpr,
    n_cols: tl.constexpr, eps: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):  # fmt: skip
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y += row_idx * Y_row_stride
    X += row_idx * X_row_stride
    r += row_idx * r_row_stride
    X_row = tl.load(X + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0).to(tl.float32)
    row_var = tl.sum(X_row * X_row, axis=0) / n_cols
    inv_var = tl.math.rsqrt(row_var + eps)
    tl.store(r, inv_var)
    normed = X_row * inv_var
    output = normed * (W_row + 1.0)
    tl.store(Y + col_offsets, triton_cast(output, Y.dtype.element_ty), mask=mask)


@triton.jit
def unsloth_geglu_exact_kernel(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr):
    block_idx = tl.program_id(0)
    offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    e_row = tl.load(e + offsets, mask=mask, other=0).to(tl.float32)
    g_row = tl.load(g + offsets, mask=mask, other=0)
    f_row = 0.5 * e_row * (tl.math.erf(tl.math.rsqrt(2.0) * e_row) + 1.0)
    f_row = f_row.to(g_row.dtype)
    tl.store(h + offsets, f_row * g_row, mask=mask)


@triton.jit
def unsloth_geglu_approx_kernel(e, g, h, n_elements, BLOCK_SIZE: tl.constexpr):
    block_idx = tl.program_id(0)
    offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    e_row = tl.load(e + offsets, mask=mask, other=0).to(tl.float32)
    g_row = tl.load(g + offsets, mask=mask, other=0)
    s = 0.7978845608028654  # sqrt(2 / pi)
    f_row = 0.5 * e_row * (triton_tanh(s * e_row * (1.0 + 0.044715 * e_row * e_row)) + 1.0)
    f_row = triton_cast(f_row, g_row.dtype)
    tl.store(h + offsets, f_row * g_row, mask=mask)


@triton.jit
def _pack_halves(x):
    # What some kernels do for speed on a GPU; Triton's interpreter runs no assembly.
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def inline_asm_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, _pack_halves(tl.load(x_ptr + offsets, mask=mask)), mask=mask)
