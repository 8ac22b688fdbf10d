"""kernelpick.ops.fuse_gated: a gated MLP written with ops.mm, compiled, runs ops.gated_mm."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._inductor.custom_graph_pass import CustomGraphPass

from kernelpick import ops, settings
from kernelpick.ops.gated_fusion import _ACTIVATIONS, fuse_when_compiled

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


def compiled_by_inductor(mlp: torch.nn.Module, x: torch.Tensor, fusion: bool) -> list[str]:
    """The kernelpick operators a compiled forward of `mlp` runs (their nodes kept, to be counted),
    checked against eager."""
    expected = mlp(x)
    torch._dynamo.reset()
    with (
        torch._inductor.config.patch(pre_grad_custom_pass=None, fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
        settings.override(compiled_picks="off", ops_fusion=fusion),
    ):
        compiled = torch.compile(mlp, fullgraph=True)
        torch.testing.assert_close(compiled(x), expected, atol=1e-4, rtol=1e-4)
        return operators_run(compiled, x)


@pytest.mark.slow
def test_inductor_compiles_the_mlp_to_two_operators_by_itself_and_to_three_with_fusion_off() -> None:
    mlp, x = MLP().requires_grad_(False), torch.randn(5, K)
    assert compiled_by_inductor(mlp, x, fusion=True) == ["kernelpick::gated_mm", "kernelpick::mm"]
    assert compiled_by_inductor(mlp, x, fusion=False) == ["kernelpick::mm"] * 3


@pytest.mark.slow
def test_a_compiled_mlp_with_trainable_weights_is_fused_and_its_gradients_match_eager() -> None:
    mlp, x = MLP(), torch.randn(4, K, requires_grad=True)
    mlp(x).square().sum().backward()
    expected = [x.grad, *(p.grad for p in mlp.parameters())]
    x.grad = None
    mlp.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    with (
        torch._inductor.config.patch(pre_grad_custom_pass=None, fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
        settings.override(compiled_picks="off"),
    ):
        compiled = torch.compile(mlp, fullgraph=True)
        ran = operators_run(lambda: compiled(x).square().sum().backward())
    assert "kernelpick::gated_mm" in ran
    for got, want in zip([x.grad, *(p.grad for p in mlp.parameters())], expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def gated_by_unlike_weights(x: torch.Tensor, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return F.silu(ops.mm(x, g)) * ops.mm(x, u)  # one product broadcast over the other's columns


@pytest.mark.slow
@pytest.mark.parametrize("gate_columns, up_columns", [(1, N), (N, 1)])
def test_inductor_leaves_a_product_of_weights_of_unlike_shapes_unfused(
    gate_columns: int, up_columns: int
) -> None:
    x, g, u = torch.randn(5, K), torch.randn(K, gate_columns), torch.randn(K, up_columns)
    torch._dynamo.reset()
    with (
        torch._inductor.config.patch(pre_grad_custom_pass=None, fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
        settings.override(compiled_picks="off"),  # the operators stay nodes, to be counted
    ):
        compiled = torch.compile(gated_by_unlike_weights, fullgraph=True)
        torch.testing.assert_close(compiled(x, g, u), gated_by_unlike_weights(x, g, u), atol=1e-4, rtol=1e-4)
        # gated_mm takes two weights of one shape
        assert operators_run(compiled, x, g, u) == ["kernelpick::mm"] * 2


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


def test_the_pass_is_added_after_the_one_set_before_once_and_only_where_fusion_is_on() -> None:
    ran: list[str] = []
    before = torch._inductor.config.pre_grad_custom_pass  # an earlier test's compile may have added it
    with torch._inductor.config.patch(pre_grad_custom_pass=lambda graph: ran.append("earlier")):
        with settings.override(ops_fusion=False):
            fuse_when_compiled()
        assert not isinstance(torch._inductor.config.pre_grad_custom_pass, CustomGraphPass)
        fuse_when_compiled()
        installed = torch._inductor.config.pre_grad_custom_pass
        fuse_when_compiled()
        assert torch._inductor.config.pre_grad_custom_pass is installed
        graph = traced(lambda x, g, u: F.silu(torch.ops.kernelpick.mm(x, g)) * torch.ops.kernelpick.mm(x, u))
        installed(graph.graph)
        graph.recompile()
        assert ran == ["earlier"] and "kernelpick.gated_mm" in graph.code
        assert installed.uuid() is None  # the earlier pass has none: Inductor's caches are bypassed
    assert torch._inductor.config.pre_grad_custom_pass is before


def test_the_pass_knows_every_activation_gated_mm_applies() -> None:
    assert {name for name, _ in _ACTIVATIONS.values()} == set(ops.GATED_ACTIVATIONS)
