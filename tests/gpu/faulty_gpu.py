"""A kernel whose configs fail on a GPU in the ways isolation must survive (module-level for workers)."""

from __future__ import annotations

import triton
import triton.language as tl

import kernelpick


@triton.jit
def copy_or_fault(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FAULT: tl.constexpr):
    """out = x; FAULT 1 stores far out of bounds (an illegal address), 2 never ends."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    values = tl.load(x_ptr + offsets, mask=mask)
    target = offsets.to(tl.int64)
    if FAULT == 1:
        target += 1 << 40
    if FAULT == 2:
        # A loop without side effects is dead code to the compiler, however long it would run:
        # the store keeps it. 64 bits: a 32-bit counter wraps to negative in about a second.
        spin = tl.program_id(0).to(tl.int64) * 0
        while spin >= 0:
            spin += 1
            tl.store(out_ptr + offsets, values, mask=mask)
    tl.store(out_ptr + target, values, mask=mask)


COPY = kernelpick.autotune(
    [kernelpick.Config({"BLOCK": 256, "FAULT": f}) for f in (0, 1, 2)]
    + [kernelpick.Config({"BLOCK": 1024, "FAULT": 0})],
    key=["n"],
    isolate=True,
)(copy_or_fault)
