# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""What the installed Triton cannot run right, found by running it: each probe launches a tiny kernel once
and says why a case must be skipped here, or None (so that a fixed Triton runs the cases again)."""

from __future__ import annotations

import functools
import re

import torch
import triton
import triton.language as tl

from tests.tune.real_kernels.base import launch


def _error_text(error: BaseException) -> str:
    """The underlying error of a kernel's failure in the interpreter ("AttributeError: ..."), without
    kernelpick's advice around it."""
    found = re.search(r"\b(\w+(?:Error|Exception): [^;]*)", str(error))
    return found.group(1) if found else str(error).splitlines()[0]


@triton.jit
def _to_fp8_kernel(source, target):
    offsets = tl.arange(0, 4)
    tl.store(target + offsets, tl.load(source + offsets).to(tl.float8e4nv))


@functools.cache
def interpreter_fp8_problem() -> str | None:
    """Why Triton's interpreter cannot run an fp8-output kernel right, or None: its fp32 -> fp8 e4m3
    conversion (`_convert_float` in triton/runtime/interpreter.py, Triton 3.9) ORs the carry out of a
    rounded-up mantissa into the exponent instead of adding it, so 7.9 becomes 4.0 (not 8.0)."""
    values = torch.tensor([7.9, 3.9, -7.9, 1.0])
    converted = torch.empty(4, dtype=torch.float8_e4m3fn)
    launch(_to_fp8_kernel, (1,), values, converted)
    expected = values.to(torch.float8_e4m3fn)
    if torch.equal(converted.float(), expected.float()):
        return None
    shown = ", ".join(f"{v:g} -> {c:g}" for v, c in zip(values.tolist(), converted.float().tolist()))
    return (
        f"Triton {triton.__version__}'s interpreter rounds fp32 to fp8 e4m3 wrongly where rounding carries into "
        f"the exponent ({shown}; torch gives {expected.float().tolist()}): `_convert_float` in "
        "triton/runtime/interpreter.py ORs the carry into the exponent bits instead of adding it"
    )


@triton.jit
def _block_pointer_kernel(source, target):
    block = tl.make_block_ptr(source, (4,), (1,), (0,), (4,), (0,))
    tl.store(target + tl.arange(0, 4), tl.load(block))


@functools.cache
def block_pointer_problem() -> str | None:
    """Why this Triton cannot run kernels written with `tl.make_block_ptr` (as fla's are), or None."""
    values = torch.arange(4.0)
    copied = torch.zeros(4)
    try:
        launch(_block_pointer_kernel, (1,), values, copied)
    except Exception as error:
        removed = "Block pointers have been removed in favor of the tensor descriptor API"
        if removed in str(error):
            return (
                f"Triton {triton.__version__} removed tl.make_block_ptr, which fla's kernels (and this one, "
                f"written as they are) use: {removed!r}"
            )
        return f"Triton {triton.__version__} cannot run tl.make_block_ptr here ({_error_text(error)})"
    return (
        None
        if torch.equal(values, copied)
        else f"Triton {triton.__version__}'s tl.make_block_ptr loads wrongly"
    )


@triton.jit
def _dot_scaled_kernel(a, a_scale, b, b_scale, c):
    rows = tl.arange(0, 16)
    ks = tl.arange(0, 32)
    x = tl.load(a + rows[:, None] * 32 + ks[None, :])
    y = tl.load(b + ks[:, None] * 16 + rows[None, :])
    x_scale = tl.load(a_scale + rows[:, None])
    y_scale = tl.load(b_scale + rows[:, None])
    tl.store(c + rows[:, None] * 16 + rows[None, :], tl.dot_scaled(x, x_scale, "e4m3", y, y_scale, "e4m3"))


@functools.cache
def interpreter_dot_scaled_problem() -> str | None:
    """Why Triton's interpreter cannot run `tl.dot_scaled` (mx formats, e8m0 scales), or None."""
    a = torch.ones((16, 32)).to(torch.float8_e4m3fn)
    b = torch.ones((32, 16)).to(torch.float8_e4m3fn)
    scale = torch.full((16, 1), 128, dtype=torch.uint8)  # 2.0 each
    c = torch.zeros((16, 16))
    try:
        launch(_dot_scaled_kernel, (1,), a, scale, b, scale, c)
    except Exception as error:
        return f"Triton {triton.__version__}'s interpreter cannot run tl.dot_scaled ({_error_text(error)})"
    return (
        None
        if torch.all(c == 128.0)
        else f"Triton {triton.__version__}'s interpreter computes tl.dot_scaled wrongly"
    )
