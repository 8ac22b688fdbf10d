"""Small Triton kernels and operators shared by the PyTorch integration tests (run in the interpreter on CPU)."""

from __future__ import annotations

import triton
import triton.language as tl

BLOCK = 16


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x + y."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """x += 1, in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    """out = x * factor."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


@triton.jit
def strided_copy_kernel(
    x_ptr, out_ptr, rows, cols, stride_xr, stride_xc, stride_or, stride_oc, BLOCK: tl.constexpr
):
    """out[r, c] = x[r, c] for any strides."""
    row = tl.program_id(0)
    cols_ = tl.arange(0, BLOCK)
    mask = cols_ < cols
    values = tl.load(x_ptr + row * stride_xr + cols_ * stride_xc, mask=mask)
    tl.store(out_ptr + row * stride_or + cols_ * stride_oc, values, mask=mask)


@triton.jit
def accumulate_kernel(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    """total += sum(x), atomically."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(total_ptr, tl.sum(values, axis=0))


def blocks(n: int) -> tuple[int]:
    return (triton.cdiv(n, BLOCK),)


@triton.jit
def impure_asm_kernel(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    """y = x through impure inline assembly: the analysis cannot be sure, so every pointer counts as written."""
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=False, pack=1)
    tl.store(y_ptr + offsets, y)


# --- operators used by several test modules (namespace kp_test_kernels) ---------------------------
import torch  # noqa: E402

import kernelpick  # noqa: E402


@kernelpick.op("kp_test_kernels::add")
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Out of place: a new tensor x + y."""
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=BLOCK)
    return out


@kernelpick.op("kp_test_kernels::increment_")
def increment_(x: torch.Tensor) -> None:
    """In place: x += 1."""
    increment_kernel[blocks(x.numel())](x, x.numel(), BLOCK=BLOCK)


@kernelpick.op("kp_test_kernels::add_and_increment_")
def add_and_increment_(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Both: returns x + y, then x += 1 in place."""
    out = torch.empty_like(x)
    add_kernel[blocks(x.numel())](x, y, out, x.numel(), BLOCK=BLOCK)
    increment_kernel[blocks(x.numel())](x, x.numel(), BLOCK=BLOCK)
    return out


@kernelpick.op("kp_test_kernels::increment_row_")
def increment_row_(x: torch.Tensor, row: int) -> None:
    """Through a view: x[row] += 1, the kernel given only the row."""
    view = x[row]
    increment_kernel[blocks(view.numel())](view, view.numel(), BLOCK=BLOCK)


@kernelpick.op("kp_test_kernels::column_major_copy")
def column_major_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of a 2-D tensor with column-major strides."""
    rows, cols = x.shape
    out = torch.empty_strided((rows, cols), (1, rows), dtype=x.dtype, device=x.device)
    strided_copy_kernel[(rows,)](
        x, out, rows, cols, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK=BLOCK
    )
    return out
