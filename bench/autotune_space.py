"""The 48-config bf16 matmul space of the autotuning benchmarks (`tuned_matmul.py` tunes over it)."""

from __future__ import annotations

import itertools

import triton

#: The 48-config bf16 matmul space: BLOCK_M x BLOCK_N x BLOCK_K x num_stages x num_warps.
SPACE = [
    dict(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_stages=s, num_warps=w)
    for m, n, k, s, w in itertools.product((64, 128), (64, 128, 256), (32, 64), (3, 4), (4, 8))
]


def triton_configs() -> list[triton.Config]:
    return [
        triton.Config(
            {k: v for k, v in c.items() if k.isupper()}, num_stages=c["num_stages"], num_warps=c["num_warps"]
        )
        for c in SPACE
    ]
