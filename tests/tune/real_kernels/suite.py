# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Every real-world case, in the order results list them, and finding one by name."""

from __future__ import annotations

from tests.tune.real_kernels import (
    block_scaled_matmul,
    flash_attention,
    fused_attention,
    linear_attention,
    matmul,
    persistent_matmul,
)
from tests.tune.real_kernels.base import Case

CASES: tuple[Case, ...] = (
    *matmul.cases(),
    *persistent_matmul.cases(),
    *fused_attention.cases(),
    *block_scaled_matmul.cases(),
    *flash_attention.cases(),
    *linear_attention.cases(),
)


def case_named(name: str) -> Case:
    """The case called `name`.

    Raises:
        KeyError: no case has that name; the message lists those that do.
    """
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"no real-kernel case {name!r}; the cases: {', '.join(c.name for c in CASES)}")
