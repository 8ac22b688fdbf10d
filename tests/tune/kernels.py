"""Small Triton kernels used by the autotuner tests (plain `@triton.jit`, run in the interpreter on CPU)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


@triton.jit
def increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """x += 1, in place: tuning it naively would add once per benchmark run."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


@triton.jit
def increment_groups_kernel(pointers_ptr, n, BLOCK: tl.constexpr):
    """Grouped, as Triton's tutorial 08 writes it: each group's tensor is an address in an int64 table."""
    base = tl.load(pointers_ptr + tl.program_id(1)).to(tl.pointer_type(tl.float32))
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(base + offsets, tl.load(base + offsets, mask=mask) + 1, mask=mask)


@triton.jit
def accumulate_kernel(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    """total += sum(x), with one atomic add per program."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(total_ptr, tl.sum(values, axis=0))


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * SCALE, mask=mask)


def grid_1d(n: int):  # type: ignore[no-untyped-def]
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
