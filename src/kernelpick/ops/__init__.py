"""Built-in tuned operations: matrix products that pick between cuBLAS and Triton templates."""

from __future__ import annotations

from kernelpick.ops.gated_fusion import fuse_gated
from kernelpick.ops.gated_mm import GATED_ACTIVATIONS, gated_mm
from kernelpick.ops.gemm import ACTIVATIONS, addmm, bmm, mm, selector
from kernelpick.ops.scaled_mm import scaled_mm

__all__ = [
    "ACTIVATIONS",
    "GATED_ACTIVATIONS",
    "addmm",
    "bmm",
    "fuse_gated",
    "gated_mm",
    "mm",
    "scaled_mm",
    "selector",
]
