"""Autotuning on a real GPU: both compile modes, resource failures, in-place safety, the store."""

from __future__ import annotations

import logging

import pytest
import torch
import triton

import kernelpick
from kernelpick import settings
from kernelpick.demo import matmul_arguments, matmul_kernel
from kernelpick.store import MemoryStore
from tests.tune.kernels import accumulate_kernel, grid_1d, increment_groups_kernel, increment_kernel

pytestmark = pytest.mark.gpu


def _matmul(kernel, a, b, c):  # type: ignore[no-untyped-def]
    m, n = a.shape[0], b.shape[1]
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](*matmul_arguments(a, b, c))


SPACE = [
    kernelpick.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3),
    kernelpick.Config(
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3
    ),
    # needs far more shared memory than any GPU has
    kernelpick.Config(
        {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=8, num_stages=5
    ),
    # the compiler rejects it
    kernelpick.Config({"BLOCK_M": 48, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}),
]


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_matmul_space_with_bad_configs(mode: str) -> None:
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = torch.empty(512, 512, device="cuda", dtype=torch.float16)
    with settings.override(compile_mode=mode):
        kernel = kernelpick.autotune(SPACE, key=["M", "N", "K"], store=MemoryStore())(matmul_kernel)
        _matmul(kernel, a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-2, atol=1e-1)
    statuses = {tuple(cfg.kwargs.values())[:3]: r.status for cfg, r in kernel.last_tuning.results.items()}
    assert statuses[(64, 64, 32)] == "ok" and statuses[(128, 128, 64)] == "ok"
    assert statuses[(256, 256, 256)] == "out_of_resources"
    assert statuses[(48, 64, 32)] == "compile_error"
    torch.ones(4, device="cuda").sum().item()  # the CUDA context is healthy


def test_in_place_kernels_are_safe_on_the_gpu() -> None:
    space = [triton.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512, 1024) for w in (2, 4)]
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    kernelpick.autotune(space, key=["n"])(increment_kernel)[grid_1d(4096)](x, 4096)
    torch.testing.assert_close(x, torch.arange(4096, device="cuda", dtype=torch.float32) + 1)

    total = torch.zeros(1, device="cuda")
    kernelpick.autotune(space, key=["n"])(accumulate_kernel)[grid_1d(4096)](
        torch.ones(4096, device="cuda"), total, 4096
    )
    assert total.item() == 4096.0


def test_a_kernel_writing_through_a_pointer_table_is_warned_of_on_the_gpu(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Triton's tutorial 08 groups tensors by address: the GPU's TTIR shows the writes through the table."""
    space = [triton.Config({"BLOCK": b}, num_warps=4) for b in (128, 256, 512, 1024)]
    groups = [torch.zeros(4096, device="cuda") for _ in range(3)]
    table = torch.tensor([g.data_ptr() for g in groups], device="cuda", dtype=torch.int64)
    kernel = kernelpick.autotune(space, key=["n"])(increment_groups_kernel)
    access = kernelpick.analyze(increment_groups_kernel, table, 4096, BLOCK=128)
    assert "loaded from `pointers_ptr`" in access.writes_elsewhere
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        kernel[lambda meta: (triton.cdiv(4096, meta["BLOCK"]), 3)](table, 4096)
    assert any("memory they point to" in r.getMessage() for r in caplog.records)
    assert all(g.min().item() >= 1 for g in groups)


def test_second_tuner_reads_the_store_on_the_gpu() -> None:
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    first = kernelpick.autotune(SPACE[:2], key=["M", "N", "K"])(matmul_kernel)
    _matmul(first, a, a, c)
    second = kernelpick.autotune(SPACE[:2], key=["M", "N", "K"])(matmul_kernel)
    _matmul(second, a, a, c)
    assert second.last_tuning.from_store and second.best_config == first.best_config
    assert not second.last_tuning.device.interpreter
