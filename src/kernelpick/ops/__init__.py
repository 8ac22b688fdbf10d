"""Built-in tuned operations: matrix products that pick between cuBLAS and Triton templates."""

from __future__ import annotations

from kernelpick.ops.gemm import ACTIVATIONS, addmm, bmm, mm, selector
from kernelpick.ops.scaled_mm import scaled_mm

__all__ = ["ACTIVATIONS", "addmm", "bmm", "mm", "scaled_mm", "selector"]
