# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Real-world kernels as a drop-in user tunes them: every case of `tests/tune/real_kernels` under
`triton.autotune` and under `kernelpick.autotune`, passing its source's own correctness check.

The cases are Triton's tutorials 03, 06, 09 and 10, Tri Dao's Triton FlashAttention and a
flash-linear-attention chunk kernel, written the way those are (config `pre_hook`s setting descriptor
block shapes, early pruning, heuristics over and under the tuner, atomics, fp8, ...). Each runs at a
tiny size with two small configs, on both sides of the contract tests' `tuner` fixture: without a GPU,
Triton's side in Triton's interpreter with a wall-clock `do_bench` (its default needs a GPU), and
kernelpick's side as a kernelpick user's code runs on a CPU. Each case is called twice: the second call
takes the tuned config from the cache, and must get it (and its `pre_hook`) right without tuning.
A case that cannot run here is skipped with the reason (the installed Triton, the GPU).
"""

from __future__ import annotations

import functools

import pytest
import triton

from tests.tune.real_kernels import CASES, Autotune, Case
from tests.tune.test_triton_contract import GPU, Tuner, tuner, wall_clock_do_bench  # noqa: F401

#: A case's inputs and outputs are compared by `case.check`; these are only for test ids.
NAMES = [case.name for case in CASES]


def autotune_of(side: Tuner) -> Autotune:
    """The decorator a user on this machine writes: Triton's needs a `do_bench` without a GPU."""
    if side.name == "triton" and not GPU:
        return functools.partial(triton.autotune, do_bench=wall_clock_do_bench)
    return side.autotune


@pytest.mark.parametrize("case", CASES, ids=NAMES)
def test_a_tuned_real_kernel_passes_its_own_check(tuner: Tuner, case: Case) -> None:  # noqa: F811
    reason = case.unsupported(tuner.device)
    if reason:
        pytest.skip(reason)
    inputs = case.make_inputs(case.tiny_size, tuner.device)
    operation = case.build(autotune_of(tuner), case.tiny_configs())
    case.check(inputs, operation(*inputs))  # tunes
    case.check(inputs, operation(*inputs))  # the tuned config, from the cache
