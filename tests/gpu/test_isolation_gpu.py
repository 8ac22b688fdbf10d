"""Isolation on a real GPU: an illegal address and an endless kernel cannot hurt the caller."""

from __future__ import annotations

import pytest
import torch
import triton

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
