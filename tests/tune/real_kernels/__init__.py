# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Real-world Triton kernels, written the way their sources write them (Triton's tutorials 03, 06, 09 and 10,
Tri Dao's Triton FlashAttention, flash-linear-attention), each with its host wrapper, inputs at any size,
a correctness check against a torch reference, a small config list for the interpreter and its source's
full list for GPUs: the drop-in suite `tests/tune/test_real_kernels.py` runs under `triton.autotune`
and `kernelpick.autotune`, and `bench/real_kernels.py` times on GPUs."""

from tests.tune.real_kernels.base import Autotune, Case, Inputs, Size, TutorialCall, launch
from tests.tune.real_kernels.suite import CASES, case_named

__all__ = ["CASES", "Autotune", "Case", "Inputs", "Size", "TutorialCall", "case_named", "launch"]
