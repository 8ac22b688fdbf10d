"""Tests of kernelpick.ops.gated_mm on CPU: the gated templates run in Triton's interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernelpick import ops
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError, TemplateError
from kernelpick.ops.gemm_templates import GEMM, PERSISTENT_TMA_GEMM, gated

# K and N divide into no block of the interpreter's configs (16 and 32), nor do the Ms above 16.
K, N = 70, 50
ROWS = (1, 4, 16, 33)
REFERENCE = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}


def weights(layout: str, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """b_gate and b_up (K, N): `w.t()` of nn.Linear weights (what a Llama MLP passes), row-major
    (K, N) matrices, or one of each."""
    generator = torch.Generator().manual_seed(len(layout))
    gate, up = (torch.randn(N, K, generator=generator, dtype=dtype) for _ in range(2))
    if layout == "columns":
        return gate.t(), up.t()
    if layout == "rows":
        return gate.t().contiguous(), up.t().contiguous()
    return gate.t(), up.t().contiguous()


def reference(a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, activation: str) -> torch.Tensor:
    a, b_gate, b_up = a.double(), b_gate.double(), b_up.double()
    return REFERENCE[activation](a @ b_gate) * (a @ b_up)


def template_choices(name: str, *inputs: torch.Tensor) -> list[object]:
    return [c for c in ops.selector(name).choices_for(*inputs) if c.description()["kind"] == "template"]


@pytest.mark.parametrize("layout", ["columns", "rows", "mixed"])
@pytest.mark.parametrize("m", ROWS)
def test_each_gated_template_computes_the_activated_gate_times_up(m: int, layout: str) -> None:
    a = torch.randn(m, K, generator=torch.Generator().manual_seed(m))
    b_gate, b_up = weights(layout)
    expected = reference(a, b_gate, b_up, "silu").float()
    swapped = reference(a, b_up, b_gate, "silu").float()
    # the inputs tell the product from its mistakes: gate and up swapped, no activation, the gate alone
    tolerance = {"atol": 2e-5 * K, "rtol": 1e-5}
    for wrong in (swapped, (a @ b_gate) * (a @ b_up), F.silu(a @ b_gate)):
        assert not torch.allclose(wrong, expected, **tolerance)
    choices = template_choices("gated_mm_silu", a, b_gate, b_up)
    names = {c.name.split(" ")[0] for c in choices}  # type: ignore[attr-defined]
    assert names == ({"triton_gated_mm", "triton_gated_mm_decode"} if m <= 16 else {"triton_gated_mm"})
    signature = Signature.of((a, b_gate, b_up), {})
    for choice in choices:
        call = choice.callable_for(signature)  # type: ignore[attr-defined]
        torch.testing.assert_close(
            call(a, b_gate, b_up), expected, **tolerance, msg=lambda text, c=choice: f"{c.name}: {text}"
        )
        assert not torch.allclose(call(a, b_up, b_gate), expected, **tolerance)


@pytest.mark.parametrize("m", [1, 4])
def test_the_gemv_form_computes_the_gated_product_in_bfloat16(m: int) -> None:
    # Triton's interpreter gets tl.dot of bfloat16 wrong, so only the GEMV form is offered there.
    a = torch.randn(m, K, dtype=torch.bfloat16)
    b_gate, b_up = weights("columns", torch.bfloat16)
    expected = reference(a, b_gate, b_up, "silu").float()
    choices = template_choices("gated_mm_silu", a, b_gate, b_up)
    assert choices and all("decode" in c.name for c in choices)  # type: ignore[attr-defined]
    signature = Signature.of((a, b_gate, b_up), {})
    scale = expected.square().mean().sqrt().item()
    for choice in choices:
        out = choice.callable_for(signature)(a, b_gate, b_up)  # type: ignore[attr-defined]
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), expected, atol=1e-2 * scale, rtol=1e-2)


@pytest.mark.parametrize("activation", ["silu", "gelu", "relu"])
def test_gated_mm_is_correct_and_every_choice_passes_verification(activation: str) -> None:
    a = torch.randn(4, K)
    b_gate, b_up = weights("columns")
    out = ops.gated_mm(a, b_gate, b_up, activation=activation)
    torch.testing.assert_close(out, reference(a, b_gate, b_up, activation).float(), atol=2e-5 * K, rtol=1e-5)
    record = ops.selector(f"gated_mm_{activation}").last_selection
    assert record is not None and len(record.candidates) >= 3
    assert all(r.result.ok for r in record.candidates), [
        (r.name, r.result.message) for r in record.candidates
    ]


def test_an_unknown_activation_and_inputs_that_do_not_fit_fail_saying_so() -> None:
    a = torch.randn(4, K)
    b_gate, b_up = weights("columns")
    with pytest.raises(ConfigError, match="activation 'tanh' is not supported; use one of 'relu'"):
        ops.gated_mm(a, b_gate, b_up, activation="tanh")
    with pytest.raises(RuntimeError):
        ops.gated_mm(a, b_gate, b_up[:, :7])
    with pytest.raises(TemplateError, match="has no gated form"):
        gated(PERSISTENT_TMA_GEMM, "silu", "acc")
    assert gated(GEMM, "silu", "acc * tl.sigmoid(acc)") is gated(GEMM, "silu", "acc * tl.sigmoid(acc)")


def test_with_grad_it_is_the_composition_of_mm_and_its_gradients_are_the_references() -> None:
    a = torch.randn(3, K, requires_grad=True)
    gate, up = (torch.randn(N, K, requires_grad=True) for _ in range(2))
    out = ops.gated_mm(a, gate.t(), up.t())
    grad = torch.randn_like(out)
    out.backward(grad)
    got = [t.grad for t in (a, gate, up)]
    for t in (a, gate, up):
        t.grad = None
    (F.silu(a @ gate.t()) * (a @ up.t())).backward(grad)
    for mine, theirs in zip(got, (a.grad, gate.grad, up.grad), strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("activation", ["silu", "gelu", "relu"])
def test_the_operators_backward_formula_gives_the_references_gradients(activation: str) -> None:
    # What a graph holding the operator (a fused graph, torch.ops.kernelpick.gated_mm called as it is)
    # differentiates with.
    inputs = [torch.randn(2, 6, dtype=torch.float64, requires_grad=True)]
    inputs += [torch.randn(6, 5, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    out = torch.ops.kernelpick.gated_mm(*inputs, activation=activation)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, grad)
    expected = torch.autograd.grad(reference(*inputs, activation), inputs, grad)
    for mine, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(mine, theirs)
