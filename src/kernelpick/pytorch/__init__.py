"""PyTorch integration: Triton kernels as real operators, with the arguments they write inferred."""

from __future__ import annotations

from kernelpick.pytorch.functional import FunctionalKernel, functional, launch
from kernelpick.pytorch.inference import Inference, InputWrite
from kernelpick.pytorch.library import LaunchPlan, clone_preserving_strides
from kernelpick.pytorch.operators import Operator, op
from kernelpick.pytorch.side_table import SideTable, side_table

__all__ = [
    "FunctionalKernel",
    "Inference",
    "InputWrite",
    "LaunchPlan",
    "Operator",
    "SideTable",
    "clone_preserving_strides",
    "functional",
    "launch",
    "op",
    "side_table",
]
