"""A `@triton.jit` helper in a module of its own, with its own alias of a builtin (as kernel libraries
keep their activations in a utils module)."""

from __future__ import annotations

import triton
import triton.language as tl

exp = tl.exp  # a builtin: unpatched, it refuses to run outside a compilation


@triton.jit
def silu(x):
    return x / (1.0 + exp(-x))
