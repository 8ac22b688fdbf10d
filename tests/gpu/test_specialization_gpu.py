"""On a GPU, misaligned pointers and integers not divisible by 16 are tuned apart, and the hot path stays cheap."""

from __future__ import annotations

import time

import pytest
import torch
import triton

import kernelpick
from kernelpick import settings
from kernelpick.store import MemoryStore
from tests.tune.kernels import add_kernel, grid_1d

pytestmark = pytest.mark.gpu

SPACE = [triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=4)]


def test_a_misaligned_slice_and_n_not_divisible_by_16_are_tuned_apart_on_a_gpu() -> None:
    kernel = kernelpick.autotune(SPACE, key=[], store=MemoryStore())(add_kernel)
    n = 1 << 20
    x, out = torch.randn(n + 16, device="cuda"), torch.empty(n, device="cuda")
    with settings.override(print_tables=False):
        kernel[grid_1d(n)](x[:n], x[:n], out, n)
        aligned = kernel.last_tuning
        kernel[grid_1d(n)](x[1 : n + 1], x[1 : n + 1], out, n)
        misaligned = kernel.last_tuning
        torch.testing.assert_close(out, 2 * x[1 : n + 1])
        kernel[grid_1d(n - 1)](x[:n], x[:n], out, n - 1)
        odd = kernel.last_tuning
    assert aligned.key[-2] == "x_ptr:D y_ptr:D out_ptr:D n:D"
    assert misaligned.key[-2] == "x_ptr:- y_ptr:- out_ptr:D n:D"
    assert odd.key[-2] == "x_ptr:D y_ptr:D out_ptr:D n:-"
    assert len(kernel.cache) == 3 and not misaligned.from_store and not odd.from_store


def test_the_tuned_hot_path_costs_little_next_to_a_launch() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    n = 4096
    x, out = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    with settings.override(print_tables=False):
        kernel[grid_1d(n)](x, x, out, n)
    best = kernel.best_config.all_kwargs()
    grid = grid_1d(n)

    def per_call(launch, calls: int = 2000) -> float:  # type: ignore[no-untyped-def]
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            launch()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / calls

    tuned = lambda: kernel[grid](x, x, out, n)  # noqa: E731
    direct = lambda: add_kernel[grid](x, x, out, n, **best)  # noqa: E731
    overheads = []
    for _ in range(5):
        overheads.append((per_call(tuned) - per_call(direct)) * 1e6)
    print(f"\ntuned-call overhead over a direct Triton launch: {min(overheads):.2f} us")
    assert min(overheads) < 5.0
