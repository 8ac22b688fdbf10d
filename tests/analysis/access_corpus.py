"""Small Triton kernels written for the access-analysis tests, each with the reads and writes it must report.

Every construct the analysis claims to handle appears at least once; `Case.constructs` says
which. Arguments are meta tensors unless a case needs something else, so nothing here needs a
GPU or even memory. The kernels live in `corpus_control.py` and `corpus_memory.py`.
"""

from __future__ import annotations

import corpus_control
import corpus_memory
from corpus_control import (
    copy,
    early_return,
    for_siblings,
    noinline_store,
    reductions,
    scalars_and_none,
    tuple_argument,
    while_siblings,
)
from corpus_memory import host_descriptors
from corpus_support import BLOCK, Case, descriptor, f32, i32, i64

CASES: list[Case] = [*corpus_control.CASES, *corpus_memory.CASES]

__all__ = [
    "BLOCK",
    "CASES",
    "Case",
    "copy",
    "descriptor",
    "early_return",
    "f32",
    "for_siblings",
    "host_descriptors",
    "i32",
    "i64",
    "noinline_store",
    "reductions",
    "scalars_and_none",
    "tuple_argument",
    "while_siblings",
]
