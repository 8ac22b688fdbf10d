"""Processed choices on a real GPU: fake tensors on CUDA, a template rendered for processed layouts,
and CUDA-event timings that include per-call processing and exclude a pre-pack."""

from __future__ import annotations

import pytest
import torch

from kernelpick import Config, Selector, extern, processed, template
from kernelpick.engine.signature import Signature
from kernelpick.ops.gemm_templates import GEMM
from kernelpick.tensors import TensorSpec

pytestmark = pytest.mark.gpu

CONFIGS = [Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=3)]


def row_major_b(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a, b.contiguous()


def test_a_template_renders_for_the_processed_layout_on_cuda() -> None:
    space = processed(
        template(GEMM, configs=CONFIGS, name="gemm"), before=row_major_b, name="gemm row-major B"
    )
    selector = Selector("mm", [extern(torch.mm), space])
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(384, 256, device="cuda", dtype=torch.float16).t()  # column-major
    torch.testing.assert_close(selector(a, b), a @ b, atol=2e-2, rtol=2e-2)
    assert selector.last_selection is not None
    results = {r.name: r.result for r in selector.last_selection.candidates}
    processed_row = next(name for name in results if name.startswith("gemm row-major B"))
    assert results[processed_row].ok, results[processed_row].message
    inner = space.inner_signature(Signature.of((a, b), {}))
    assert inner.inputs[1] == TensorSpec.of(b.contiguous())  # found on fake CUDA tensors


def relayout(b: torch.Tensor) -> torch.Tensor:
    """An expensive re-layout: a transposing copy, many times over."""
    for _ in range(20):
        b = b.t().contiguous().t().contiguous()
    return b


def test_cuda_timings_include_per_call_processing_and_exclude_a_prepack() -> None:
    selector = Selector(
        "mm",
        [
            extern(torch.mm),
            processed(extern(torch.mm), before=lambda a, b: (a, relayout(b)), name="per call"),
            processed(extern(torch.mm), prepack={1: relayout}, name="prepacked"),
        ],
        reference=lambda a, b: a @ b,
    )
    a = torch.randn(256, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    selector(a, b)
    assert selector.last_selection is not None
    results = {r.name: r.result for r in selector.last_selection.candidates}
    assert all(r.ok for r in results.values())
    assert results["per call"].cost_ms > 3 * results["prepacked"].cost_ms
    assert results["prepacked"].cost_ms < 1.5 * results["torch.mm"].cost_ms
