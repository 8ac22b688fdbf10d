"""A template whose fastest configs are wrong, and selectors searching it at module level (so that
worker processes can import them)."""

from __future__ import annotations

import time

import torch

from kernelpick import Config, Selector, TritonTemplate, extern, template

# SHIFT is a config's meta-parameter: the configs with SHIFT=1 compute x * 2 + 1, a wrong answer
# that verification must catch: they are the fastest (the largest blocks run the fewest programs in
# Triton's interpreter).
SOURCE = """
{{ def_kernel() }}
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < {{ size("X", 0) }}
    acc = tl.load(X + offsets, mask=mask).to(tl.float32) * 2.0 + SHIFT
    {{ store_output(("offsets",), "acc", "mask") }}
"""
DOUBLE = TritonTemplate(
    "double",
    SOURCE,
    inputs=("X",),
    output=lambda x: (x.size, x.dtype),
    grid=lambda context: (-(-context.output.size[0] // context.meta["BLOCK"]),),
)
#: 16 configs: 8 right, and 8 faster but wrong.
CONFIGS = [
    *(
        Config({"BLOCK": block, "SHIFT": 0.0}, num_warps=warps)
        for block in (32, 64, 128, 256)
        for warps in (1, 2)
    ),
    *(
        Config({"BLOCK": block, "SHIFT": 1.0}, num_warps=warps)
        for block in (512, 1024)
        for warps in (1, 2, 4, 8)
    ),
]


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def halve_then_double(x: torch.Tensor) -> torch.Tensor:
    return (x / 2) * 4


def slow_double(x: torch.Tensor) -> torch.Tensor:
    time.sleep(0.3)  # slower than any config in the interpreter, on a busy 2-core machine too
    return x * 2


#: Searched in worker processes.
ISOLATED = Selector(
    "double_isolated", [extern(slow_double), template(DOUBLE, configs=CONFIGS)], search="random", isolate=True
)
