"""Choices and kernels that fail in every way a benchmark can fail, for the isolation tests.

Module-level, so that worker processes can import them.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

import torch
import triton
import triton.language as tl

import kernelpick


def add_slowly(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    time.sleep(0.002)
    return a + b


def add_and_abort(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    os.abort()


def add_and_segfault(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    return a + b


def add_forever(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    while True:
        time.sleep(1)


def add_and_raise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("this choice always fails")


def subtract_quickly(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a - b  # fast and wrong


FAULTY_ADD = kernelpick.Selector(
    "faulty_add",
    [
        kernelpick.extern(add_slowly, name="slow but right"),
        kernelpick.extern(add_and_abort, name="aborts"),
        kernelpick.extern(add_and_segfault, name="segfaults"),
        kernelpick.extern(add_forever, name="hangs"),
        kernelpick.extern(add_and_raise, name="raises"),
        kernelpick.extern(subtract_quickly, name="wrong"),
        kernelpick.extern(torch.add, name="torch.add"),
    ],
    isolate=True,
)


@kernelpick.autotune(
    configs=[
        kernelpick.Config({"BLOCK": 64, "SPIN": False}),
        kernelpick.Config({"BLOCK": 128, "SPIN": False}),
        kernelpick.Config({"BLOCK": 128, "SPIN": True}),
    ],
    key=["n"],
    isolate=True,
)
@triton.jit
def add_or_spin(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, SPIN: tl.constexpr):
    """out = x + y; with SPIN, a loop that never ends first."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if SPIN:
        count = tl.program_id(0) * 0
        while count >= 0:
            count += 1
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


@triton.jit
def add_blocks(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # BLOCK must be a power of 2
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def bind_add(a: torch.Tensor, b: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
    out = torch.empty_like(a)
    return (a, b, out, a.numel()), out


def bind_and_segfault(a: torch.Tensor, b: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
    ctypes.string_at(0)  # compiling this choice binds its arguments first: the compiling worker dies
    return bind_add(a, b)


def _blocks(meta: dict[str, Any]) -> tuple[int]:
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


COMPILED_ADD = kernelpick.Selector(
    "compiled_add",
    [
        kernelpick.extern(torch.add, name="torch.add"),
        kernelpick.triton_choice(
            add_blocks,
            grid=_blocks,
            configs=[kernelpick.Config({"BLOCK": 64}), kernelpick.Config({"BLOCK": 48})],
            bind=bind_add,
        ),
        kernelpick.triton_choice(
            add_blocks,
            grid=_blocks,
            configs=[kernelpick.Config({"BLOCK": 128})],
            bind=bind_and_segfault,
            name="segfaults binding",
        ),
    ],
    isolate=True,
)


# Well-behaved selectors for the tests of the workers themselves (isolated by the tests' settings).
REUSED = kernelpick.Selector("reused", [kernelpick.extern(add_slowly), kernelpick.extern(torch.add)])
RETIRED = kernelpick.Selector("retired", [kernelpick.extern(add_slowly), kernelpick.extern(torch.add)])
STARTED_AHEAD = kernelpick.Selector(
    "started_ahead", [kernelpick.extern(add_slowly), kernelpick.extern(torch.add)]
)


def plus_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1.0


def plus_tf32_switch(x: torch.Tensor) -> torch.Tensor:
    """x + 1 where torch's TF32 switch is on, x + 0 where it is off: right only as the caller set it."""
    return x + float(torch.backends.cuda.matmul.allow_tf32)


TF32_SWITCH = kernelpick.Selector(
    "tf32_switch", [kernelpick.extern(plus_one), kernelpick.extern(plus_tf32_switch)]
)
