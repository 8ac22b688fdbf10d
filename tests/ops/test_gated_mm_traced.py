"""kernelpick.ops.gated_mm under torch.compile, torch.export and fake tensors: one operator node, whose
pick a compiled graph runs in its place (as `mm`'s)."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch.nn.functional as F
from tests.ops.compiled import aot_graphs
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelpick import Selector, ops, settings
from kernelpick.errors import ConfigError
from kernelpick.store import MemoryStore

# Sizes no other test uses, so that the signatures here are tuned here.
K, N = 22, 18


def mlp_inputs(m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x, and the gate and up weights as a Llama MLP passes them: `w.t()` of (N, K) weights."""
    generator = torch.Generator().manual_seed(m)
    x, gate, up = (
        torch.randn(m, K, generator=generator),
        *(torch.randn(N, K, generator=generator) for _ in range(2)),
    )
    return x, gate.t(), up.t()


def gated(x: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor) -> torch.Tensor:
    return ops.gated_mm(x, b_gate, b_up)


def expected(x: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor) -> torch.Tensor:
    return F.silu(x @ b_gate) * (x @ b_up)


def test_a_compiled_call_is_one_operator_node_equal_to_eager() -> None:
    inputs = mlp_inputs(5)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(gated, backend=counter, fullgraph=True)
    torch.testing.assert_close(compiled(*inputs), expected(*inputs))
    assert counter.frame_count == 1
    assert "torch.ops.kernelpick.gated_mm" in counter.graphs[0].code, counter.graphs[0].code


def test_the_compiled_graph_runs_the_library_pick_tuned_while_compiling() -> None:
    # On this CPU the pick is torch.mm twice then the activation and product: the graph AOTAutograd
    # hands Inductor has those aten calls in the operator's place, and running it selects nothing.
    inputs = mlp_inputs(6)
    selector = ops.selector("gated_mm_silu")
    pick = selector.implementation(*inputs)
    assert getattr(pick, "func", pick).__name__ == "torch_gated_mm"
    selector.clear()
    codes: list[str] = []
    torch._dynamo.reset()
    compiled = torch.compile(gated, backend=aot_graphs(codes), fullgraph=True)
    torch.testing.assert_close(compiled(*inputs), expected(*inputs))
    [code] = codes
    assert "kernelpick" not in code and code.count("aten.mm.default") == 2 and "silu" in code, code
    assert len(selector.records) == 1  # tuned while compiling
    selector.clear()
    torch.testing.assert_close(compiled(*inputs), expected(*inputs))
    assert not selector.records, "the graph runs the pick, not the selection"


def test_with_compiled_picks_off_symbolic_sizes_or_export_the_operator_stays() -> None:
    codes: list[str] = []
    torch._dynamo.reset()
    compiled = torch.compile(gated, backend=aot_graphs(codes), fullgraph=True)
    inputs = mlp_inputs(7)
    with settings.override(compiled_picks="off"):
        torch.testing.assert_close(compiled(*inputs), expected(*inputs))
    assert "torch.ops.kernelpick.gated_mm.default" in codes[-1], codes[-1]
    torch._dynamo.reset()
    dynamic = torch.compile(gated, backend=aot_graphs(codes), dynamic=True, fullgraph=True)
    torch.testing.assert_close(dynamic(*mlp_inputs(9)), expected(*mlp_inputs(9)))
    assert "torch.ops.kernelpick.gated_mm.default" in codes[-1], codes[-1]

    class Gated(torch.nn.Module):
        def forward(self, x: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor) -> torch.Tensor:
            return ops.gated_mm(x, b_gate, b_up, activation="gelu")

    exported = torch.export.export(Gated(), inputs)
    assert "torch.ops.kernelpick.gated_mm.default" in exported.graph_module.code
    assert "activation = 'gelu'" in exported.graph_module.code
    torch.testing.assert_close(
        exported.module()(*inputs), F.gelu(inputs[0] @ inputs[1]) * (inputs[0] @ inputs[2])
    )


def test_fake_tensors_get_the_output_without_selecting() -> None:
    before = len(ops.selector("gated_mm_silu").records)
    with FakeTensorMode():
        x, b_gate, b_up = torch.empty(33, K), torch.empty(N, K).t(), torch.empty(N, K).t()
        out = ops.gated_mm(x, b_gate, b_up)
        assert out.shape == (33, N) and out.stride() == (N, 1)
        with pytest.raises(ConfigError, match="activation 'tanh' is not supported"):
            ops.gated_mm(x, b_gate, b_up, activation="tanh")
    assert len(ops.selector("gated_mm_silu").records) == before


_names = itertools.count()


def test_a_gated_template_pick_is_traced_as_its_kernels_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    # The gated skinny template split along K: its two kernels (the products' partial sums, then
    # their reduction, activation and product) go in the graph as wrap_triton launches, as they do
    # for a GPU's tensors (for CPU tensors the operator stays: Inductor runs no Triton kernel there).
    from torch._functorch.aot_autograd import aot_export_module

    from kernelpick.select import selector_op

    monkeypatch.setattr(selector_op, "_inductor_runs_triton", lambda signature: True)

    from kernelpick.ops.gemm import ACTIVATIONS, _constants, builtin_template
    from kernelpick.ops.gemm_configs import decode_configs
    from kernelpick.ops.gemm_templates import SKINNY_GEMM
    from kernelpick.ops.gemm_templates import gated as gated_template

    configs = decode_configs(0, 1, products=2)
    space = builtin_template(
        gated_template(SKINNY_GEMM, "silu", ACTIVATIONS["silu"] or ""),
        lambda signature: [c for c in configs(signature) if c.kwargs["SPLIT_K"] > 1][:1],
        _constants(False),
        "triton_gated_mm_decode",
    )
    selector = Selector("gated template only", [space], store=MemoryStore(), reference=expected)
    name = f"kernelpick_test::gated_template_{next(_names)}"
    op = selector.as_op(name, fake=expected, schema="(Tensor a, Tensor b_gate, Tensor b_up) -> Tensor")

    class Gated(torch.nn.Module):
        def forward(self, x: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor) -> tuple[torch.Tensor]:
            return (op(x, b_gate, b_up),)

    graph, _ = aot_export_module(Gated(), list(mlp_inputs(2)), trace_joint=False)
    assert graph.code.count("higher_order.triton_kernel_wrapper_functional(") == 2, graph.code
    assert "aten.empty.memory_format([4, 1, 2, 18]" in graph.code  # both products' sums, 2 splits each
    assert name.split("::")[1] not in graph.code, graph.code
    record = selector.last_selection
    assert record is not None and all(r.result.ok for r in record.candidates)
