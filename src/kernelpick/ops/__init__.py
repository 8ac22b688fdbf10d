"""Built-in tuned operations: matrix products that pick between cuBLAS and Triton templates."""

from __future__ import annotations

from kernelpick.ops.gemm import ACTIVATIONS, addmm, bmm, mm, selector

__all__ = ["ACTIVATIONS", "addmm", "bmm", "mm", "selector"]
