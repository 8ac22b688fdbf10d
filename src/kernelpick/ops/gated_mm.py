"""`gated_mm`: `activation(a @ b_gate) * (a @ b_up)`, a gated MLP's first half (SwiGLU), in one kernel."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from kernelpick.bench.verify import tf32_allowed
from kernelpick.engine.choice import extern
from kernelpick.errors import ConfigError
from kernelpick.ops.gemm import (
    ACTIVATIONS,
    _constants,
    _hot,
    _mm_fine,
    _selectors,
    builtin_template,
    hot_path,
    mm,
    on_meta,
    register_selectors,
    torch_addmm_activation,
)
from kernelpick.ops.gemm import selector as ops_selector
from kernelpick.ops.gemm_configs import decode_configs, gemm_configs
from kernelpick.ops.gemm_templates import GEMM, SKINNY_GEMM, gated
from kernelpick.select.selector import Selector
from kernelpick.select.selector_op import (
    define_operator,
    dispatch_modes,
    dynamo_tracing,
    traceable,
    traceable_pick,
)

#: The activations `gated_mm` applies to `a @ b_gate`: "silu" (SwiGLU), "gelu" (exact, GeGLU), "relu".
GATED_ACTIVATIONS = tuple(name for name in ACTIVATIONS if name is not None)
_GATED = {activation: f"gated_mm_{activation}" for activation in GATED_ACTIVATIONS}
_GATED_TF32 = {activation: f"{name}_tf32" for activation, name in _GATED.items()}
_FLOAT32 = torch.float32
_grad_enabled = torch._C.is_grad_enabled


@traceable
def torch_gated_mm(
    a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str = "silu"
) -> torch.Tensor:
    """`torch.mm` twice, the activation and the product: the unfused reference of `gated_mm`."""
    return torch_addmm_activation(torch.mm(a, b_gate), activation).mul_(torch.mm(a, b_up))


def _gated_fine(a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor) -> bool:
    return _mm_fine(a, b_gate) and _mm_fine(a, b_up) and b_gate.shape == b_up.shape


def _build(activation: str, tf32: bool) -> Selector:
    constants = _constants(tf32)
    expression = ACTIVATIONS[activation]
    assert expression is not None  # GATED_ACTIVATIONS has no None
    return Selector(
        f"kernelpick.ops.gated_mm_{activation}" + ("_tf32" if tf32 else ""),
        [
            extern(functools.partial(torch_gated_mm, activation=activation), name=f"torch.mm*2+{activation}"),
            builtin_template(
                gated(GEMM, activation, expression),
                gemm_configs(0, 1, products=2),
                constants,
                "triton_gated_mm",
            ),
            builtin_template(
                gated(SKINNY_GEMM, activation, expression),
                decode_configs(0, 1, products=2),
                constants,
                "triton_gated_mm_decode",
            ),
        ],
        check=on_meta(torch_gated_mm, _gated_fine),
    )


def _composed(a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str) -> torch.Tensor:
    """`ops.mm`'s products, differentiable as they are, then the activation and product: a call that
    needs gradients."""
    composed: torch.Tensor = torch_addmm_activation(mm(a, b_gate), activation) * mm(a, b_up)
    return composed


register_selectors(
    {
        name + suffix: functools.partial(_build, activation, bool(suffix))
        for activation, name in _GATED.items()
        for suffix in ("", "_tf32")
    },
    {  # where the hot path sends calls that need gradients
        names[activation]: functools.partial(_composed, activation=activation)
        for names in (_GATED, _GATED_TF32)
        for activation in GATED_ACTIVATIONS
    },
)


def _unknown_activation(activation: Any) -> ConfigError:
    return ConfigError(
        f"gated_mm activation {activation!r} is not supported; use one of "
        f"{', '.join(map(repr, GATED_ACTIVATIONS))}"
    )


def _selector_name(b_gate: torch.Tensor, activation: str) -> str:
    names = _GATED_TF32 if b_gate.dtype is _FLOAT32 and b_gate.is_cuda and tf32_allowed() else _GATED
    name = names.get(activation)
    if name is None:
        raise _unknown_activation(activation)
    return name


def _gated_mm(
    a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str = "silu"
) -> torch.Tensor:
    """The selection, which the operator runs (`gated_mm` repeats these lines: two calls less)."""
    name = _selector_name(b_gate, activation)
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 3))(a, b_gate, b_up)
    return out


def _gated_mm_pick(
    a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str = "silu"
) -> Callable[..., Any] | None:
    """What a compiled graph runs in `_gated_mm`'s place for inputs like these (tuning first if needed)."""
    if activation not in _GATED:
        return None
    name = _selector_name(b_gate, activation)
    call = traceable_pick(_selectors.get(name) or ops_selector(name), a, b_gate, b_up)
    if call is None:
        return None

    def picked(a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str = "silu") -> Any:
        return call(a, b_gate, b_up)  # the activation is the selector's

    return picked


def _gated_mm_fake(
    a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str = "silu"
) -> torch.Tensor:
    if activation not in _GATED:
        raise _unknown_activation(activation)
    out: torch.Tensor = torch_gated_mm(a, b_gate, b_up, activation=activation)
    return out


def _gated_mm_backward(
    args: tuple[Any, ...], kwargs: dict[str, Any], output: torch.Tensor, grad: torch.Tensor
) -> tuple[Any, ...]:
    """The gradients from the two products, computed again (the forward fused them away)."""
    a, b_gate, b_up = args
    with torch.enable_grad():
        gate = (a @ b_gate).detach().requires_grad_()
        activated = torch_addmm_activation(gate, kwargs.get("activation", "silu"))
    up = a @ b_up
    (grad_gate,) = torch.autograd.grad(activated, gate, grad * up)
    grad_up = grad * activated.detach()
    return grad_gate @ b_gate.mT + grad_up @ b_up.mT, a.mT @ grad_gate, a.mT @ grad_up


_GATED_MM = define_operator(
    "kernelpick::gated_mm",
    _gated_mm,
    schema="(Tensor a, Tensor b_gate, Tensor b_up, *, str activation='silu') -> Tensor",
    fake=_gated_mm_fake,
    backward=_gated_mm_backward,
    pick=_gated_mm_pick,
)


def gated_mm(
    a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, *, activation: str = "silu"
) -> torch.Tensor:
    """`activation(a @ b_gate) * (a @ b_up)` for 2-D `a` (M, K), `b_gate` and `b_up` (K, N), by the
    fastest correct choice for these inputs: a gated MLP's `silu(gate(x)) * up(x)` is
    `gated_mm(x, gate.weight.t(), up.weight.t())`.

    Choices: `torch.mm` twice then the activation and product (the reference), and the gated forms of
    `mm`'s tiled Triton template and, for M up to 16, of its skinny template: each reads `a` once for
    both products and writes the output once. fp16, bf16 and fp32 (TF32 where
    `torch.backends.cuda.matmul.allow_tf32`). Under `torch.compile`, `torch.export` or fake tensors it
    is the operator `torch.ops.kernelpick.gated_mm`. Where grad mode is on and an input requires grad,
    it is `activation(ops.mm(a, b_gate)) * ops.mm(a, b_up)`, differentiable as `ops.mm` is.

    Args:
        a: (M, K).
        b_gate: (K, N), the product the activation applies to.
        b_up: (K, N), of `b_gate`'s dtype and device.
        activation: "silu" (the default: SwiGLU), "gelu" (exact, erf: GeGLU) or "relu".

    Raises:
        ConfigError: an unknown activation.
    """
    if dynamo_tracing() or dispatch_modes():
        return _traced_or_composed(a, b_gate, b_up, activation)
    # `_gated_mm`'s lines, not a call of it: two calls less on the eager path.
    names = _GATED_TF32 if b_gate.dtype is _FLOAT32 and b_gate.is_cuda and tf32_allowed() else _GATED
    name = names.get(activation)
    if name is None:
        raise _unknown_activation(activation)
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 3))(a, b_gate, b_up)
    return out


def _traced_or_composed(
    a: torch.Tensor, b_gate: torch.Tensor, b_up: torch.Tensor, activation: str
) -> torch.Tensor:
    """A traced call: the operator, or where it needs gradients `_composed`."""
    if _grad_enabled() and (a.requires_grad or b_gate.requires_grad or b_up.requires_grad):
        _selector_name(b_gate, activation)  # an unknown activation raises
        return _composed(a, b_gate, b_up, activation=activation)
    traced: torch.Tensor = _GATED_MM(a, b_gate, b_up, activation=activation)
    return traced
