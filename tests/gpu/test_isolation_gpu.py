"""Isolation on a real GPU: an illegal address and an endless kernel cannot hurt the caller."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick import settings
from tests.gpu import faulty_gpu

pytestmark = pytest.mark.gpu


def test_illegal_address_and_endless_kernel_are_survived() -> None:
    x = torch.randn(1 << 16, device="cuda")
    out = torch.empty_like(x)
    with settings.override(bench_timeout_s=20.0):
        faulty_gpu.COPY[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    torch.testing.assert_close(out, x)
    statuses = {
        c.kwargs["FAULT"]: r.status
        for c, r in faulty_gpu.COPY.last_tuning.results.items()
        if c.kwargs["BLOCK"] == 256
    }
    assert statuses == {0: "ok", 1: "crashed", 2: "timeout"}
    assert torch.ones(8, device="cuda").sum().item() == 8.0


def test_a_kernel_defined_in_a_test_is_isolated_from_its_faults() -> None:
    # Defined here, as Triton's own tests define kernels: it crosses to the workers by value.
    @kernelpick.autotune(
        [kernelpick.Config({"BLOCK": 256, "FAULT": f}) for f in (0, 1)]
        + [kernelpick.Config({"BLOCK": 512, "FAULT": 0})],
        key=["n"],
    )
    @triton.jit
    def copy_or_stray(x_ptr, out_ptr, n, BLOCK: tl.constexpr, FAULT: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        target = offsets.to(tl.int64)
        if FAULT == 1:  # an illegal address: the CUDA context of whoever runs it is broken
            target += 1 << 40
        tl.store(out_ptr + target, tl.load(x_ptr + offsets, mask=mask), mask=mask)

    x = torch.randn(1 << 16, device="cuda")
    out = torch.empty_like(x)
    copy_or_stray[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    torch.testing.assert_close(out, x)
    statuses = {
        (c.kwargs["BLOCK"], c.kwargs["FAULT"]): r.status for c, r in copy_or_stray.last_tuning.results.items()
    }
    assert statuses == {(256, 0): "ok", (256, 1): "crashed", (512, 0): "ok"}
    assert copy_or_stray.timed_here == {}
    assert torch.ones(8, device="cuda").sum().item() == 8.0
