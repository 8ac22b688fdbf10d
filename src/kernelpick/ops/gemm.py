"""`mm`, `addmm` and `bmm`: selectors over cuBLAS (through torch) and the built-in Triton GEMM templates.

The selectors are built on first use. Each keys its tunings by the inputs' signature and, for
float32 on a GPU, by whether TF32 is allowed (`torch.backends.cuda.matmul.allow_tf32`): the
templates use TF32 exactly when torch may.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from kernelpick.errors import ConfigError
from kernelpick.ops.gemm_configs import gemm_configs, persistent_configs
from kernelpick.ops.gemm_templates import GEMM, PERSISTENT_TMA_GEMM
from kernelpick.select.choice import extern
from kernelpick.select.render import Epilogue
from kernelpick.select.selector import Selector
from kernelpick.select.signature import Signature
from kernelpick.select.template_choice import template
from kernelpick.select.verify import tf32_allowed

#: Activations `addmm` can fuse, as Triton expressions over `acc`.
ACTIVATIONS: dict[str | None, str | None] = {
    None: None,
    "relu": "tl.maximum(acc, 0.0)",
    "gelu": "0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))",
    "silu": "acc * tl.sigmoid(acc)",
}
_BIAS = Epilogue("acc + bias", ("bias",), name="bias")
_EPILOGUES = {
    name: _BIAS if expression is None else _BIAS.then(expression, name=f"bias+{name}")
    for name, expression in ACTIVATIONS.items()
}


def _tf32_key(a: torch.Tensor, b: torch.Tensor, *rest: Any, **kwargs: Any) -> bool | None:
    """Part of the key for float32 on a GPU: whether TF32 is allowed (None elsewhere)."""
    if b.dtype is torch.float32 and b.is_cuda:
        return tf32_allowed()
    return None


def _addmm_key(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, **kwargs: Any) -> bool | None:
    return _tf32_key(a, b)


def _constants(signature: Signature) -> dict[str, Any]:
    return {
        "ALLOW_TF32": bool(signature.user_key),
        "NUM_SMS": signature.device.multiprocessors or 4,
    }


def torch_addmm(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None
) -> torch.Tensor:
    """`torch.addmm` then the activation: the unfused reference of `addmm`."""
    out = torch.addmm(bias, a, b)
    if activation == "relu":
        return torch.relu_(out)
    if activation == "gelu":
        return F.gelu(out)
    if activation == "silu":
        return F.silu(out, inplace=True)
    return out


def _addmm_epilogue(signature: Signature) -> Epilogue:
    return _EPILOGUES[signature.named_kwargs.get("activation")]


def _build_mm() -> Selector:
    return Selector(
        "kernelpick.ops.mm",
        [
            extern(torch.mm, name="torch.mm", out=torch.mm),
            template(GEMM, configs=gemm_configs(0, 1), constants=_constants, name="triton_mm"),
            template(
                PERSISTENT_TMA_GEMM,
                configs=persistent_configs(0, 1),
                constants=_constants,
                name="triton_mm_tma",
            ),
        ],
        key=_tf32_key,
    )


def _build_addmm() -> Selector:
    arguments = ("bias", "A", "B")
    return Selector(
        "kernelpick.ops.addmm",
        [
            extern(torch_addmm, name="torch.addmm"),
            template(
                GEMM,
                configs=gemm_configs(1, 2),
                epilogue=_addmm_epilogue,
                arguments=arguments,
                constants=_constants,
                name="triton_addmm",
            ),
            template(
                PERSISTENT_TMA_GEMM,
                configs=persistent_configs(1, 2),
                epilogue=_addmm_epilogue,
                arguments=arguments,
                constants=_constants,
                name="triton_addmm_tma",
            ),
        ],
        key=_addmm_key,
    )


def _build_bmm() -> Selector:
    return Selector(
        "kernelpick.ops.bmm",
        [
            extern(torch.bmm, name="torch.bmm", out=torch.bmm),
            template(GEMM, configs=gemm_configs(0, 1), constants=_constants, name="triton_bmm"),
        ],
        key=_tf32_key,
    )


_BUILDERS: dict[str, Callable[[], Selector]] = {"mm": _build_mm, "addmm": _build_addmm, "bmm": _build_bmm}
_selectors: dict[str, Selector] = {}
_lock = threading.Lock()


def selector(name: str) -> Selector:
    """The selector behind `kernelpick.ops.<name>` (its records say what was picked and why).

    Raises:
        ConfigError: `name` is not one of mm, addmm, bmm.
    """
    found = _selectors.get(name)
    if found is not None:
        return found
    if name not in _BUILDERS:
        raise ConfigError(f"kernelpick.ops has no operation {name!r}; it has {', '.join(_BUILDERS)}")
    with _lock:
        if name not in _selectors:
            _selectors[name] = _BUILDERS[name]()
        return _selectors[name]


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` for 2-D `a` (M, K) and `b` (K, N), by the fastest correct choice for these inputs.

    Choices: `torch.mm` (cuBLAS on GPUs), the tiled Triton GEMM template and, on sm_90+ GPUs, the
    persistent TMA template. fp16, bf16 and fp32 (TF32 where `torch.backends.cuda.matmul.allow_tf32`).
    """
    return (_selectors.get("mm") or selector("mm"))(a, b)


def addmm(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None
) -> torch.Tensor:
    """`activation(bias + a @ b)` with the bias and activation fused into the Triton templates' epilogue.

    Args:
        bias: broadcast to (M, N), like `torch.addmm`'s input (e.g. a vector of N).
        a: (M, K).
        b: (K, N).
        activation: None, "relu", "gelu" (exact, erf) or "silu".

    Raises:
        ConfigError: an unknown activation.
    """
    if activation not in ACTIVATIONS:
        raise ConfigError(
            f"addmm activation {activation!r} is not supported; use one of {', '.join(map(repr, ACTIVATIONS))}"
        )
    return (_selectors.get("addmm") or selector("addmm"))(bias, a, b, activation=activation)


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched `a @ b` for `a` (B, M, K) and `b` (B, K, N), by the fastest correct choice for these inputs."""
    return (_selectors.get("bmm") or selector("bmm"))(a, b)
