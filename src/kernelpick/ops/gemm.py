"""`mm`, `addmm` and `bmm`: selectors over cuBLAS (through torch) and the built-in Triton GEMM templates."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from kernelpick import settings
from kernelpick.bench.verify import tf32_allowed
from kernelpick.calls import made_by
from kernelpick.engine.choice import Choice, ConfigSource, ExternChoice, extern
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError
from kernelpick.ops.gated_fusion import fuse_when_compiled
from kernelpick.ops.gemm_configs import decode_configs, gemm_configs, persistent_configs
from kernelpick.ops.gemm_templates import GEMM, PERSISTENT_TMA_GEMM, SKINNY_GEMM
from kernelpick.select.render import Epilogue
from kernelpick.select.selector import Selector
from kernelpick.select.selector_op import (
    define_operator,
    dispatch_modes,
    dynamo_tracing,
    traceable,
    traceable_pick,
)
from kernelpick.select.template import TritonTemplate
from kernelpick.select.template_choice import TemplateChoices, template
from kernelpick.workers.plan import start_early

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


# A product may use TF32 when it is float32 on a GPU where torch allows it: tested inline by each
# call, `b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed()`, most calls stopping at the dtype.
# Such calls go to selectors of their own (`_tf32`) whose templates use TF32, so that the templates
# use it exactly when torch may, and a call that cannot pays that one check.
_FLOAT32 = torch.float32


def _constants(tf32: bool) -> Callable[[Signature], dict[str, Any]]:
    def constants(signature: Signature) -> dict[str, Any]:
        return {"ALLOW_TF32": tf32, "NUM_SMS": signature.device.multiprocessors or 4}

    return constants


def static_shapes() -> bool:
    """Whether the templates bake sizes into their source (`KERNELPICK_OPS_STATIC_SHAPES`, read as a
    selector is made; off by default). Baked, each shape compiles its own binaries; passed as
    arguments, the GEMM templates render a config's source alike for every shape whose N and K
    divide into its tiles alike, so one binary serves them all and a model's many shapes compile
    each config once (the split-K decode template sizes its splits by K, so its sources still
    differ by K). On an H100 the picks were as fast either way, and tuning took 13 % less with sizes
    passed (bench/results/static_shapes_ab-h100.json)."""
    return settings.current().ops_static_shapes


@traceable
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


@traceable
def addmm_relu_lt(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`relu(bias + a @ b)` in one cuBLASLt call (its bias+ReLU epilogue) where torch can use it."""
    return torch._addmm_activation(bias, a, b)


@traceable
def addmm_gelu_tanh_lt(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`gelu(bias + a @ b)` in one cuBLASLt call: its GELU epilogue is the tanh approximation."""
    return torch._addmm_activation(bias, a, b, use_gelu=True)


_HALF = (torch.float16, torch.bfloat16)


class HalfPrecisionOnly:
    """A choice offered only for fp16/bf16 inputs on a GPU.

    cuBLASLt's GELU epilogue is tanh-approximated: it differs from exact GELU by up to 4.7e-4 (at
    x = ±2.7). That is inside the tolerance fp16 and bf16 outputs are verified with (2e-3 and
    1e-2 of the output's RMS) but not float32's (1e-4), so float32 keeps exact GELU. Where the
    output is small the difference is not: at x = -2.7, GELU is -0.0094 and the approximation is
    5 % off. A caller who needs exact GELU there uses a Selector without this choice.
    """

    def __init__(self, choice: ExternChoice) -> None:
        self.choice = choice

    @property
    def name(self) -> str:
        return self.choice.name

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        b = signature.tensor(2)
        return [self.choice] if b.dtype in _HALF and not signature.device.interpreter else []


def _library_fused(activation: str | None) -> list[Any]:
    """cuBLASLt's one-call `addmm` + activation, where torch has one."""
    if activation == "relu":
        return [extern(addmm_relu_lt, name="torch._addmm_activation[relu]")]
    if activation == "gelu":
        return [HalfPrecisionOnly(extern(addmm_gelu_tanh_lt, name="torch._addmm_activation[gelu_tanh]"))]
    return []


def builtin_template(
    source: TritonTemplate,
    configs: ConfigSource,
    constants: Callable[[Signature], dict[str, Any]],
    name: str,
    **options: Any,
) -> TemplateChoices:
    """One of kernelpick.ops's templates (`scaled_mm`'s too) as choices, with sizes baked in or passed
    as `static_shapes` says: every built-in template is made here, so none misses the setting."""
    return template(
        source, configs=configs, constants=constants, static_shapes=static_shapes(), name=name, **options
    )


def on_meta(operation: Callable[..., Any], plainly_fine: Callable[..., bool]) -> Callable[..., None]:
    """`operation` run on meta copies of a call's tensors: torch's own error for inputs it does not
    take (a selection's `check`, before anything is compiled). Inputs that `plainly_fine` says
    `operation` takes skip it: torch's shape checks on meta tensors import sympy on their first
    use in a process, about a second on the 2-core CPU, which a first call would wait for."""

    def check(*inputs: Any, **kwargs: Any) -> None:
        tensors = all(isinstance(t, torch.Tensor) and t.layout is _STRIDED for t in inputs)
        if kwargs or not tensors or not plainly_fine(*inputs):
            meta = [torch.empty_like(t, device="meta") if isinstance(t, torch.Tensor) else t for t in inputs]
            operation(*meta, **kwargs)

    return check


_STRIDED = torch.strided


def _mm_fine(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dim() == b.dim() == 2 and a.shape[1] == b.shape[0] and a.dtype is b.dtype and a.device == b.device
    )


def _addmm_fine(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> bool:
    if not _mm_fine(a, b) or bias.dtype is not a.dtype or bias.device != a.device or bias.dim() > 2:
        return False
    wanted = (a.shape[0], b.shape[1])[2 - bias.dim() :]
    return all(size in (1, extent) for size, extent in zip(bias.shape, wanted))


def _bmm_fine(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dim() == b.dim() == 3
        and a.shape[0] == b.shape[0]
        and a.shape[2] == b.shape[1]
        and a.dtype is b.dtype
        and a.device == b.device
    )


def _build_mm(tf32: bool) -> Selector:
    constants = _constants(tf32)
    return Selector(
        "kernelpick.ops.mm" + ("_tf32" if tf32 else ""),
        [
            extern(torch.mm, name="torch.mm", out=torch.mm),
            builtin_template(GEMM, gemm_configs(0, 1), constants, "triton_mm"),
            builtin_template(PERSISTENT_TMA_GEMM, persistent_configs(0, 1), constants, "triton_mm_tma"),
            builtin_template(SKINNY_GEMM, decode_configs(0, 1), constants, "triton_mm_decode"),
        ],
        check=on_meta(torch.mm, _mm_fine),
    )


def _build_addmm(activation: str | None, tf32: bool) -> Selector:
    # One selector per activation: the call then has no keyword arguments to key on.
    fused = {"epilogue": _EPILOGUES[activation], "arguments": ("bias", "A", "B")}
    constants = _constants(tf32)
    suffix = ("" if activation is None else f"_{activation}") + ("_tf32" if tf32 else "")
    reference = torch_addmm if activation is None else functools.partial(torch_addmm, activation=activation)
    return Selector(
        "kernelpick.ops.addmm" + suffix,
        [
            extern(reference, name="torch.addmm" + ("" if activation is None else f"+{activation}")),
            *_library_fused(activation),
            builtin_template(GEMM, gemm_configs(1, 2), constants, "triton_addmm", **fused),
            builtin_template(
                PERSISTENT_TMA_GEMM, persistent_configs(1, 2), constants, "triton_addmm_tma", **fused
            ),
            builtin_template(SKINNY_GEMM, decode_configs(1, 2), constants, "triton_addmm_decode", **fused),
        ],
        check=on_meta(torch.addmm, _addmm_fine),
    )


def _build_bmm(tf32: bool) -> Selector:
    constants = _constants(tf32)
    return Selector(
        "kernelpick.ops.bmm" + ("_tf32" if tf32 else ""),
        [
            extern(torch.bmm, name="torch.bmm", out=torch.bmm),
            builtin_template(GEMM, gemm_configs(0, 1), constants, "triton_bmm"),
            builtin_template(SKINNY_GEMM, decode_configs(0, 1), constants, "triton_bmm_decode"),
        ],
        check=on_meta(torch.bmm, _bmm_fine),
    )


_BUILDERS: dict[str, Callable[[], Selector]] = {
    name + suffix: functools.partial(build, bool(suffix))
    for name, build in (("mm", _build_mm), ("bmm", _build_bmm))
    for suffix in ("", "_tf32")
}
_BUILDERS.update(
    {
        "addmm" + ("" if activation is None else f"_{activation}") + suffix: functools.partial(
            _build_addmm, activation, bool(suffix)
        )
        for activation in ACTIVATIONS
        for suffix in ("", "_tf32")
    }
)
#: The selector of each activation of addmm, and of its TF32 variant.
_ADDMM = {activation: "addmm" if activation is None else f"addmm_{activation}" for activation in ACTIVATIONS}
_ADDMM_TF32 = {activation: f"{name}_tf32" for activation, name in _ADDMM.items()}
#: The selectors made so far, by name (every module of kernelpick.ops reads it on its eager path).
_selectors: dict[str, Selector] = {}
#: Each of them called with its count of inputs (`Selector.positional`): what the eager paths call.
_hot: dict[str, Callable[..., Any]] = {}
#: Where each selector's hot path sends the calls that need gradients: its operation through autograd
#: (`Selector.positional`'s `differentiable`; scaled_mm's have none, as it has no gradients).
_differentiable: dict[str, Callable[..., Any]] = {}
_lock = threading.Lock()
# The selectors are made on first use, but a program that imports the ops will tune them: its
# workers start (and Triton's compiler warms up) now, while it still sets up.
start_early(None)


def selector(name: str) -> Selector:
    """The selector behind `kernelpick.ops.<name>` (its records say what was picked and why).

    `mm`, `bmm` and `addmm` (`addmm_relu`, `addmm_gelu`, `addmm_silu` with an activation) serve
    every call but float32 ones on a GPU where TF32 is allowed, which the same names ending in
    `_tf32` serve: their templates use TF32 and their results are stored apart. `scaled_mm_bf16`,
    `scaled_mm_fp16` and `scaled_mm_fp32` serve `kernelpick.ops.scaled_mm` by output dtype, with
    `_bias` and `_fast` (`use_fast_accum`) in their names where those apply: `scaled_mm_bias_fast_bf16`.

    Raises:
        ConfigError: `name` is not one of them.
    """
    found = _selectors.get(name)
    if found is not None:
        return found
    if name not in _BUILDERS:
        raise ConfigError(f"kernelpick.ops has no operation {name!r}; it has {', '.join(_BUILDERS)}")
    with _lock:
        if name not in _selectors:
            _selectors[name] = _BUILDERS[name]()
            made_by(_selectors[name], "kernelpick.ops.gemm:selector", name)  # KERNELPICK_RECORD finds it so
        return _selectors[name]


def hot_path(name: str, count: int) -> Callable[..., Any]:
    """`selector(name)` called with `count` positional inputs, kept for the next calls: calls that need
    gradients go through autograd (`_differentiable`), so the eager paths do not test for them."""
    path = _hot[name] = selector(name).positional(count, _differentiable.get(name))
    return path


@contextmanager
def fresh_selectors() -> Iterator[None]:
    """Within the block, every `selector(name)` is made afresh, reading the settings then in effect
    (`KERNELPICK_OPS_STATIC_SHAPES`, say); the selectors made before are back after it. For
    benchmarks and tests that compare settings in one process. The registry is emptied in place:
    `scaled_mm` holds it by name too."""
    with _lock:
        earlier, earlier_hot = dict(_selectors), dict(_hot)
        _selectors.clear()
        _hot.clear()
    try:
        yield
    finally:
        with _lock:
            _selectors.clear()
            _selectors.update(earlier)
            _hot.clear()
            _hot.update(earlier_hot)


def register_selectors(
    builders: Mapping[str, Callable[[], Selector]],
    differentiable: Mapping[str, Callable[..., Any]] | None = None,
) -> None:
    """Let `selector(name)` make and keep the selectors of another module of kernelpick.ops (such as
    `scaled_mm`), each built by its function on first use; `differentiable[name]`, where given, is
    where the hot path sends that selector's calls that need gradients (`hot_path`)."""
    _BUILDERS.update(builders)
    _differentiable.update(differentiable or {})


# The selection behind each operation, which its operator runs. mm, addmm and bmm repeat these
# lines rather than call them: a call less on the eager path.
def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    name = "mm_tf32" if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else "mm"
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 2))(a, b)
    return out


def _addmm(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None
) -> torch.Tensor:
    names = _ADDMM_TF32 if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else _ADDMM
    name = names.get(activation)
    if name is None:
        raise _unknown_activation(activation)
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 3))(bias, a, b)
    return out


def _bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    name = "bmm_tf32" if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else "bmm"
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 2))(a, b)
    return out


def _mm_pick(a: torch.Tensor, b: torch.Tensor) -> Callable[..., Any] | None:
    """What a compiled graph runs in `_mm`'s place for inputs like these (tuning first if needed)."""
    name = "mm_tf32" if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else "mm"
    return traceable_pick(_selectors.get(name) or selector(name), a, b)


def _bmm_pick(a: torch.Tensor, b: torch.Tensor) -> Callable[..., Any] | None:
    name = "bmm_tf32" if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else "bmm"
    return traceable_pick(_selectors.get(name) or selector(name), a, b)


def _addmm_pick(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None
) -> Callable[..., Any] | None:
    names = _ADDMM_TF32 if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else _ADDMM
    name = names.get(activation)
    call = None if name is None else traceable_pick(_selectors.get(name) or selector(name), bias, a, b)
    if call is None:
        return None

    def picked(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None) -> Any:
        return call(bias, a, b)  # the activation is the selector's, fused or applied by the pick

    return picked


def _unknown_activation(activation: str | None) -> ConfigError:
    return ConfigError(
        f"addmm activation {activation!r} is not supported; use one of {', '.join(map(repr, ACTIVATIONS))}"
    )


# The fake implementations: torch's own operation on the fake tensors gives the output's metadata
# (and torch's errors for inputs that do not fit), which every choice matches: a new contiguous
# tensor of the inputs' dtype.
def _mm_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    fuse_when_compiled()  # a gated MLP in a graph Dynamo traces becomes one gated_mm (docs/ops.md)
    return torch.mm(a, b)


def _addmm_fake(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None
) -> torch.Tensor:
    if activation not in ACTIVATIONS:
        raise _unknown_activation(activation)
    return torch.addmm(bias, a, b)


# The backward formulas: aten's, from the inputs (and, for an activation other than ReLU, the
# pre-activation, computed again: the forward fused it away). Their products are torch's.
def _matmul_backward(
    args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, grad: torch.Tensor
) -> tuple[Any, ...]:
    a, b = args
    return grad @ b.mT, a.mT @ grad


def _addmm_backward(
    args: tuple[Any, ...], kwargs: dict[str, Any], output: torch.Tensor, grad: torch.Tensor
) -> tuple[Any, ...]:
    bias, a, b = args
    activation = kwargs.get("activation")
    if activation == "relu":
        grad = grad * (output > 0)
    elif activation is not None:
        with torch.enable_grad():
            before = torch.addmm(bias, a, b).detach().requires_grad_()
            (grad,) = torch.autograd.grad(torch_addmm_activation(before, activation), before, grad)
    return grad.sum_to_size(bias.shape), grad @ b.mT, a.mT @ grad


def torch_addmm_activation(before: torch.Tensor, activation: str) -> torch.Tensor:
    """The activation of `torch_addmm`, out of place (for a backward to differentiate)."""
    return {"relu": torch.relu, "gelu": F.gelu, "silu": F.silu}[activation](before)


_MM = define_operator(
    "kernelpick::mm",
    _mm,
    schema="(Tensor a, Tensor b) -> Tensor",
    fake=_mm_fake,
    backward=_matmul_backward,
    pick=_mm_pick,
)
_ADDMM_OP = define_operator(
    "kernelpick::addmm",
    _addmm,
    schema="(Tensor bias, Tensor a, Tensor b, *, str? activation=None) -> Tensor",
    fake=_addmm_fake,
    backward=_addmm_backward,
    pick=_addmm_pick,
)
_BMM = define_operator(
    "kernelpick::bmm",
    _bmm,
    schema="(Tensor a, Tensor b) -> Tensor",
    fake=torch.bmm,
    backward=_matmul_backward,
    pick=_bmm_pick,
)
# A call goes through autograd where grad mode is on and an input requires grad: the hot path sends it
# there where its front does not answer, which it never does for such inputs (`Calls.remember`).
_differentiable.update(
    {name + suffix: op for name, op in (("mm", _MM), ("bmm", _BMM)) for suffix in ("", "_tf32")}
)
_differentiable.update(
    {
        names[activation]: functools.partial(_ADDMM_OP, activation=activation)
        for names in (_ADDMM, _ADDMM_TF32)
        for activation in ACTIVATIONS
    }
)


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`a @ b` for 2-D `a` (M, K) and `b` (K, N), by the fastest correct choice for these inputs.

    Choices: `torch.mm` (cuBLAS on GPUs), the tiled Triton GEMM template, on sm_90+ GPUs the persistent
    TMA template and, for M up to 16 (decode), the skinny template (GEMV-like, split along K where
    that fills the GPU). fp16, bf16 and fp32 (TF32 where `torch.backends.cuda.matmul.allow_tf32`).
    Under `torch.compile`, `torch.export` or fake tensors it is the operator `torch.ops.kernelpick.mm`.
    """
    if dynamo_tracing() or dispatch_modes():
        traced: torch.Tensor = _MM(a, b)
        return traced
    name = "mm_tf32" if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else "mm"
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 2))(a, b)
    return out


def addmm(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None
) -> torch.Tensor:
    """`activation(bias + a @ b)` with the bias and activation fused into the Triton templates' epilogue.

    Choices: `torch.addmm` then the activation (the reference), the Triton templates (those of `mm`)
    with the bias and activation fused, and for "relu" and "gelu" cuBLASLt's fused epilogue
    (`torch._addmm_activation`; for "gelu" only in fp16/bf16, as its GELU is the tanh approximation).
    Under `torch.compile`, `torch.export` or fake tensors it is the operator `torch.ops.kernelpick.addmm`.

    Args:
        bias: broadcast to (M, N), like `torch.addmm`'s input (e.g. a vector of N).
        a: (M, K).
        b: (K, N).
        activation: None, "relu", "gelu" (exact, erf) or "silu".

    Raises:
        ConfigError: an unknown activation.
    """
    if dynamo_tracing() or dispatch_modes():
        traced: torch.Tensor = _ADDMM_OP(bias, a, b, activation=activation)
        return traced
    names = _ADDMM_TF32 if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else _ADDMM
    name = names.get(activation)
    if name is None:
        raise _unknown_activation(activation)
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 3))(bias, a, b)
    return out


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched `a @ b` for `a` (B, M, K) and `b` (B, K, N), by the fastest correct choice for these inputs.

    Choices: `torch.bmm`, the tiled Triton GEMM template and, for M up to 16, the skinny template.

    Under `torch.compile`, `torch.export` or fake tensors it is the operator `torch.ops.kernelpick.bmm`.
    """
    if dynamo_tracing() or dispatch_modes():
        traced: torch.Tensor = _BMM(a, b)
        return traced
    name = "bmm_tf32" if b.dtype is _FLOAT32 and b.is_cuda and tf32_allowed() else "bmm"
    out: torch.Tensor = (_hot.get(name) or hot_path(name, 2))(a, b)
    return out
