"""kernelpick.ops are as differentiable as the aten operations they replace: eager and under torch.compile,
a model with trainable weights gets aten's gradients through `ops.mm`, `ops.addmm` and `ops.bmm`."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from kernelpick import ops

ACTIVATED: dict[str | None, Callable[[torch.Tensor], torch.Tensor]] = {
    None: lambda x: x,
    "relu": torch.relu,
    "gelu": F.gelu,
    "silu": F.silu,
}


def gradients(loss: torch.Tensor, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, tensors))


@pytest.mark.parametrize("activation", list(ACTIVATED))
def test_addmm_gradients_are_atens(activation: str | None) -> None:
    generator = torch.Generator().manual_seed(1)
    bias, a, b = (
        torch.randn(*s, generator=generator, requires_grad=True) for s in ((17,), (9, 33), (33, 17))
    )
    ours = gradients(ops.addmm(bias, a, b, activation=activation).square().sum(), bias, a, b)
    theirs = gradients(ACTIVATED[activation](torch.addmm(bias, a, b)).square().sum(), bias, a, b)
    for mine, expected in zip(ours, theirs):
        torch.testing.assert_close(mine, expected, atol=1e-4, rtol=1e-4)


def test_mm_and_bmm_gradients_are_atens_for_the_inputs_that_need_them() -> None:
    a, b = torch.randn(9, 33, requires_grad=True), torch.randn(33, 17)  # b needs none
    (grad_a,) = gradients(ops.mm(a, b).sum(), a)
    torch.testing.assert_close(grad_a, torch.ones(9, 17) @ b.T)
    x, y = torch.randn(2, 9, 33, requires_grad=True), torch.randn(2, 33, 17, requires_grad=True)
    ours = gradients(ops.bmm(x, y).sum(), x, y)
    theirs = gradients(torch.bmm(x, y).sum(), x, y)
    for mine, expected in zip(ours, theirs):
        torch.testing.assert_close(mine, expected)


class Mlp(torch.nn.Module):
    """A gated MLP with trainable weights, written with kernelpick.ops."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(2)
        self.up = torch.nn.Parameter(torch.randn(24, 40, generator=generator) / 5)
        self.bias = torch.nn.Parameter(torch.randn(40, generator=generator))
        self.down = torch.nn.Parameter(torch.randn(40, 24, generator=generator) / 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.mm(ops.addmm(self.bias, x, self.up, activation="silu"), self.down)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(torch.addmm(self.bias, x, self.up)) @ self.down


def test_a_compiled_model_with_trainable_weights_trains_as_eager_torch_does() -> None:
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    model, x = Mlp(), torch.randn(7, 24)
    graphs = AotEagerAndRecordGraphs()
    compiled = torch.compile(model, backend=graphs, fullgraph=True)
    loss = compiled(x).square().mean()
    ours = gradients(loss, *model.parameters())
    theirs = gradients(model.reference(x).square().mean(), *model.parameters())
    torch.testing.assert_close(loss, model.reference(x).square().mean())
    for mine, expected in zip(ours, theirs):
        torch.testing.assert_close(mine, expected, atol=1e-4, rtol=1e-4)
    # The forward calls the picks themselves (on this CPU torch.addmm then SiLU, and torch.mm), with
    # no operator node; the backward is aten's.
    forward = [str(n.target) for g in graphs.fw_graphs for n in g.graph.nodes if n.op == "call_function"]
    assert "aten.addmm.default" in forward and "aten.silu.default" in forward and "aten.mm.default" in forward
    assert not [target for target in forward if "kernelpick" in target], forward


def test_without_grad_the_eager_call_stays_off_the_dispatcher() -> None:
    a, b = torch.randn(9, 33, requires_grad=True), torch.randn(33, 17)
    with torch.no_grad():
        out = ops.mm(a, b)
    assert not out.requires_grad and out.grad_fn is None
    assert ops.mm(a.detach(), b).grad_fn is None  # nothing needs a gradient: the selection alone


def test_a_pick_that_autograd_cannot_see_through_still_gets_atens_gradients() -> None:
    # A Triton template's output has no autograd history: without the operator's formula the weights
    # of an eager model would silently get no gradient. Here the pick is a product autograd cannot
    # see through, as a Triton kernel's is.
    from kernelpick import Selector, extern
    from kernelpick.ops import gemm

    def like_a_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a.detach(), b.detach())

    with gemm.fresh_selectors():
        gemm._selectors["mm"] = Selector("like a Triton pick", [extern(like_a_kernel)])
        a, b = torch.randn(9, 33, requires_grad=True), torch.randn(33, 17, requires_grad=True)
        ours = gradients(ops.mm(a, b).square().sum(), a, b)
    theirs = gradients(torch.mm(a, b).square().sum(), a, b)
    for mine, expected in zip(ours, theirs):
        torch.testing.assert_close(mine, expected)


@pytest.mark.parametrize("operation", ["mm", "addmm", "gated_mm"])
def test_a_call_that_needs_gradients_gets_them_after_calls_that_did_not(operation: str) -> None:
    # The eager path tests for gradients only where its selector's front misses: calls without them,
    # with inputs that require grad or not, must leave nothing there that answers a call needing them.
    from kernelpick import Selector, extern
    from kernelpick.ops import gemm

    def detached(*inputs: torch.Tensor) -> torch.Tensor:
        return reference(*[t.detach() for t in inputs])  # autograd cannot see through it, as a Triton pick

    generator = torch.Generator().manual_seed(3)
    shapes = {
        "mm": [(9, 33), (33, 17)],
        "addmm": [(17,), (9, 33), (33, 17)],
        "gated_mm": [(9, 33), (33, 17), (33, 17)],
    }
    reference, name = {
        "mm": (torch.mm, "mm"),
        "addmm": (lambda bias, a, b: torch.relu(torch.addmm(bias, a, b)), "addmm_relu"),
        "gated_mm": (lambda a, g, u: F.silu(a @ g) * (a @ u), "gated_mm_silu"),
    }[operation]
    call = {
        "mm": ops.mm,
        "addmm": lambda *inputs: ops.addmm(*inputs, activation="relu"),
        "gated_mm": ops.gated_mm,
    }[operation]
    inputs = [torch.randn(*shape, generator=generator) for shape in shapes[operation]]
    needing = [t.clone().requires_grad_() for t in inputs]
    with gemm.fresh_selectors():
        gemm._selectors[name] = Selector(f"{name}, like a Triton pick", [extern(detached, name="detached")])
        for _ in range(3):
            call(*inputs)  # into the front
            with torch.no_grad():
                call(*needing)
        ours = gradients(call(*needing).square().sum(), *needing)
        parameters = [torch.nn.Parameter(t.clone()) for t in inputs]  # not plain tensors: no front
        theirs_too = gradients(call(*parameters).square().sum(), *parameters)
    theirs = gradients(reference(*needing).square().sum(), *needing)
    for mine, also, expected in zip(ours, theirs_too, theirs, strict=True):
        torch.testing.assert_close(mine, expected, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(also, expected, atol=1e-4, rtol=1e-4)
