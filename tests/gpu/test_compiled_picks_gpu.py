"""Under torch.compile with Inductor, `kernelpick.ops.mm`'s pick is launched by Inductor's own code."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]


@pytest.mark.parametrize("picks", ["library", "all"])
@pytest.mark.parametrize("rows", [1, 4096])
def test_inductors_code_runs_the_pick_not_the_operator(rows: int, picks: str) -> None:
    from torch._inductor.utils import run_and_get_code

    from kernelpick import ops, settings

    x = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: torch.nn.functional.silu(ops.mm(a, b)), fullgraph=True)
    # Inductor's caches would give the graph compiled under the other setting: its key does not know it.
    with (
        settings.override(compiled_picks=picks),
        torch._inductor.config.patch(fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
    ):
        out, codes = run_and_get_code(compiled, x, w)
    torch.testing.assert_close(out, torch.nn.functional.silu(x @ w), rtol=2e-2, atol=2e-2)
    code = "\n".join(codes)
    pick = ops.selector("mm").implementation(x, w)
    if pick is torch.mm:
        assert "extern_kernels.mm" in code and "kernelpick.mm" not in code, code[-3000:]
    elif picks == "all":  # a template: its kernel, launched from Inductor's wrapper
        assert "kernelpick_" in code and "kernelpick.mm" not in code, code[-3000:]
    else:
        assert "kernelpick.mm" in code, code[-3000:]
