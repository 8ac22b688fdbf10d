"""GPU checks of `kernelpick.ops.gated_mm` (marked `gpu`: skipped without one): every gated template
config compiles, verifies against the unfused reference and runs, at decode and prefill sizes, in the
layout a Llama MLP passes its weights (`w.t()` of `nn.Linear` weights)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from tests.ops.test_gemm_gpu import failures

from kernelpick import ops

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m", [1, 4, 16, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gated_mm_on_a_gpu(m: int, dtype: torch.dtype) -> None:
    x = torch.randn(m, 512, device="cuda", dtype=dtype)
    gate = torch.randn(1408, 512, device="cuda", dtype=dtype) / 512**0.5
    up = torch.randn(1408, 512, device="cuda", dtype=dtype) / 512**0.5
    expected = (F.silu(x.float() @ gate.float().t()) * (x.float() @ up.float().t())).to(dtype)
    torch.testing.assert_close(ops.gated_mm(x, gate.t(), up.t()), expected, rtol=2e-2, atol=5e-2)
    assert failures("gated_mm_silu") == {}
    record = ops.selector("gated_mm_silu").last_selection
    assert record is not None
    templates = [r for r in record.candidates if r.name.startswith("triton_gated_mm")]
    assert templates and any(r.result.ok for r in templates)  # a gated template ran and verified


def test_a_compiled_llama_mlp_over_ops_mm_runs_its_gate_and_up_as_one_gated_mm() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 512, device="cuda", dtype=torch.bfloat16)
    gate, up = (torch.randn(1408, 512, device="cuda", dtype=torch.bfloat16) / 512**0.5 for _ in range(2))
    down = torch.randn(512, 1408, device="cuda", dtype=torch.bfloat16) / 1408**0.5

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return ops.mm(F.silu(ops.mm(x, gate.t())) * ops.mm(x, up.t()), down.t())

    expected = mlp(x)
    ops.selector("gated_mm_silu").clear()
    torch._dynamo.reset()
    out = torch.compile(mlp, fullgraph=True)(x)
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    assert ops.selector("gated_mm_silu").records  # the fused call was selected while compiling
