"""kernelpick.ops.fuse_gated: a gated MLP written with ops.mm, compiled, runs ops.gated_mm."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from kernelpick import ops, settings

# Sizes no other test uses.
K, N = 26, 14


class MLP(torch.nn.Module):
    """A Llama MLP over ops.mm: down(silu(gate(x)) * up(x)), three products."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gate, self.up = torch.nn.Linear(K, N, bias=False), torch.nn.Linear(K, N, bias=False)
        self.down = torch.nn.Linear(N, K, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.silu(ops.mm(x, self.gate.weight.t())) * ops.mm(x, self.up.weight.t())
        return ops.mm(hidden, self.down.weight.t())


def operators_run(fn: Any, *args: Any) -> list[str]:
    with torch.profiler.profile() as profile:
        fn(*args)
    return sorted(e.name for e in profile.events() if e.name.startswith("kernelpick::"))


def test_a_compiled_mlp_with_the_pass_runs_two_operators_and_matches_eager() -> None:
    mlp, x = MLP().requires_grad_(False), torch.randn(3, K)
    expected = mlp(x)
    fused: list[int] = []

    def fusing(graph: torch.fx.GraphModule, inputs: Any) -> Any:
        fused.append(ops.fuse_gated(graph))
        return graph.forward

    torch._dynamo.reset()
    compiled = torch.compile(mlp, backend=fusing, fullgraph=True)
    torch.testing.assert_close(compiled(x), expected, atol=1e-4, rtol=1e-4)
    assert fused == [1]
    assert operators_run(compiled, x) == ["kernelpick::gated_mm", "kernelpick::mm"]


@pytest.mark.slow
def test_with_use_fuse_gated_inductor_compiles_the_mlp_to_two_operators() -> None:
    mlp, x = MLP().requires_grad_(False), torch.randn(5, K)
    expected = mlp(x)
    torch._dynamo.reset()
    with (
        torch._inductor.config.patch(pre_grad_custom_pass=None, fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
        settings.override(compiled_picks="off"),  # the operators stay nodes, to be counted
    ):
        ops.use_fuse_gated()
        compiled = torch.compile(mlp, fullgraph=True)
        torch.testing.assert_close(compiled(x), expected, atol=1e-4, rtol=1e-4)
        assert operators_run(compiled, x) == ["kernelpick::gated_mm", "kernelpick::mm"]


def traced(fn: Any) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(fn)


def test_only_a_gated_product_whose_parts_nothing_else_reads_is_fused() -> None:
    mm = torch.ops.kernelpick.mm
    swapped = traced(lambda x, g, u: mm(x, u) * F.gelu(mm(x, g)))
    assert ops.fuse_gated(swapped) == 1
    assert "activation = 'gelu'" in swapped.code and "kernelpick.mm" not in swapped.code
    x, g, u = torch.randn(2, K), torch.randn(K, N), torch.randn(K, N)
    torch.testing.assert_close(swapped(x, g, u), (x @ u) * F.gelu(x @ g), atol=1e-4, rtol=1e-4)
    for fn in (
        lambda x, g, u: (lambda gate: (F.silu(gate) * mm(x, u), gate))(mm(x, g)),  # the gate read again
        lambda x, g, u: F.silu(mm(x, g)) * mm(x.t().t(), u),  # another x
        lambda x, g, u: F.gelu(mm(x, g), approximate="tanh") * mm(x, u),  # not gated_mm's GELU
        lambda x, g, u: torch.sigmoid(mm(x, g)) * mm(x, u),  # not an activation it applies
    ):
        graph = traced(fn)
        assert ops.fuse_gated(graph) == 0, graph.code
        assert "gated_mm" not in graph.code


def test_use_fuse_gated_runs_after_the_pass_set_before_and_once() -> None:
    ran: list[str] = []
    with torch._inductor.config.patch(pre_grad_custom_pass=lambda graph: ran.append("earlier")):
        ops.use_fuse_gated()
        ops.use_fuse_gated()
        installed = torch._inductor.config.pre_grad_custom_pass
        graph = traced(lambda x, g, u: F.silu(torch.ops.kernelpick.mm(x, g)) * torch.ops.kernelpick.mm(x, u))
        installed(graph.graph)
        graph.recompile()
        assert ran == ["earlier"] and "kernelpick.gated_mm" in graph.code
        assert installed.uuid() is None  # the earlier pass has none: Inductor's caches are bypassed
    assert torch._inductor.config.pre_grad_custom_pass is None
