"""`scaled_mm`: an fp8 product with scales, selecting between `torch._scaled_mm` and Triton fp8 templates."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelpick.bench.verify import Tolerance, tolerance_for
from kernelpick.engine.choice import Choice, extern
from kernelpick.engine.signature import Signature
from kernelpick.errors import ArgumentError
from kernelpick.ops.gemm import _hot, _selectors, builtin_template, hot_path, register_selectors
from kernelpick.ops.gemm import selector as ops_selector
from kernelpick.ops.scaled_mm_configs import FP8, persistent_scaled_gemm_configs, scaled_gemm_configs
from kernelpick.ops.scaled_mm_templates import OUT_DTYPES, persistent_tma_scaled_gemm, scaled_gemm
from kernelpick.select.render import Epilogue
from kernelpick.select.selector import Selector
from kernelpick.select.selector_op import define_operator, dispatch_modes, dynamo_tracing, traceable_pick
from kernelpick.tensors import TensorSpec, example_generator, example_tensor

#: Products of float8 inputs, whatever the output dtype, at least: fp8
#: tensor cores accumulate in fewer bits than float32 (docs/measurement.md, "Checking outputs").
FP8_PRODUCT_TOLERANCE = Tolerance(1e-2, 1e-2)
#: Products of float8 inputs accumulated in the tensor cores along all of K (torch's
#: `use_fast_accum=True`): the truncations add up along K.
FP8_FAST_ACCUMULATION_TOLERANCE = Tolerance(0.0625, 0.0625)


def fp8_product_tolerance(out_dtype: torch.dtype, *, fast_accumulation: bool = False) -> Tolerance:
    """The tolerance for outputs of `out_dtype` of a product of float8 inputs: the looser, field by
    field, of the output dtype's own and `FP8_PRODUCT_TOLERANCE` (`FP8_FAST_ACCUMULATION_TOLERANCE`
    when the accumulation may stay in the tensor cores along all of K)."""
    allowance = FP8_FAST_ACCUMULATION_TOLERANCE if fast_accumulation else FP8_PRODUCT_TOLERANCE
    own = tolerance_for(out_dtype) or allowance
    return Tolerance(max(own.rtol, allowance.rtol), max(own.atol, allowance.atol))


_BIAS = Epilogue("acc + bias", ("bias",), name="bias")
#: torch._scaled_mm on GPUs takes K and N in multiples of 16 (cuBLASLt's fp8 alignment); so does this
#: operation on every device, so that what runs on a CPU runs on a GPU.
ALIGNMENT = 16


def selector_name(out_dtype: torch.dtype, *, bias: bool = False, use_fast_accum: bool = False) -> str:
    """The name of the selector serving calls with this output dtype, bias or not, and accumulation
    (`kernelpick.ops.selector(name)` gives it).

    Raises:
        ArgumentError: an output dtype other than bf16, fp16 and fp32, or a bias with an fp32 output.
    """
    name = _NAMES.get((out_dtype, bool(bias), bool(use_fast_accum)))
    if name is None:
        raise _unsupported(out_dtype, bias)
    return name


def _name(out_dtype: torch.dtype, bias: bool, fast: bool) -> str:
    return "scaled_mm" + ("_bias" if bias else "") + ("_fast" if fast else "") + f"_{OUT_DTYPES[out_dtype]}"


# A bias with an fp32 output is refused, as torch._scaled_mm on GPUs refuses it.
_VARIANTS = [
    (dtype, bias, fast)
    for dtype in OUT_DTYPES
    for bias in (False, True)
    for fast in (False, True)
    if not (bias and dtype == torch.float32)
]
# Keyed by what a call gives (its out_dtype may be None or anything else: no selector, an error).
_NAMES: dict[tuple[torch.dtype | None, bool, bool], str] = {v: _name(*v) for v in _VARIANTS}


def _unsupported(out_dtype: Any, bias: bool) -> ArgumentError:
    if out_dtype is None:
        return ArgumentError(
            "scaled_mm needs out_dtype= (torch.bfloat16, torch.float16 or torch.float32): torch._scaled_mm's "
            "default, a float8 output, is not supported; pass out_dtype=torch.bfloat16 for what an fp8 "
            "linear layer usually returns"
        )
    if out_dtype == torch.float32 and bias:
        return ArgumentError(
            "scaled_mm takes a bias only with a bf16 or fp16 output, as torch._scaled_mm on GPUs: for a "
            "float32 output add it afterwards, `scaled_mm(...) + bias`"
        )
    return ArgumentError(
        f"scaled_mm writes torch.bfloat16, torch.float16 or torch.float32, got out_dtype={out_dtype!r}"
    )


def _layout(value: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    if isinstance(value, TensorSpec):
        return value.size, value.stride
    return tuple(value.shape), tuple(value.stride())


def _describe(value: Any) -> str:
    if isinstance(value, (torch.Tensor, TensorSpec)):
        size, stride = _layout(value)
        return f"{str(value.dtype).removeprefix('torch.')} of size {list(size)}, stride {list(stride)}"
    return f"a {type(value).__name__}"


def check_arguments(
    a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, out_dtype: torch.dtype
) -> tuple[Any, Any]:
    """Check a call's inputs (tensors, fake tensors or their `TensorSpec`s); returns (M, N).

    Raises:
        ArgumentError: what is wrong, what was expected and what to do.
    """
    for name, value in (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(value, (torch.Tensor, TensorSpec)):
            raise ArgumentError(f"scaled_mm's {name} must be a tensor, got {_describe(value)}")
    if a.dtype != FP8 or b.dtype != FP8:
        raise ArgumentError(
            f"scaled_mm multiplies float8_e4m3fn matrices, got a {_describe(a)} and b {_describe(b)}: "
            "quantize both (e.g. (x / scale).to(torch.float8_e4m3fn)), or use kernelpick.ops.mm for "
            "16- and 32-bit matrices"
        )
    (a_size, a_stride), (b_size, b_stride) = _layout(a), _layout(b)
    if len(a_size) != 2 or len(b_size) != 2 or a_size[1] != b_size[0]:
        raise ArgumentError(
            f"scaled_mm takes a (M, K) and b (K, N), got a {_describe(a)} and b {_describe(b)}"
        )
    m, k = a_size
    n = b_size[1]
    if k % ALIGNMENT or n % ALIGNMENT:
        raise ArgumentError(
            f"scaled_mm needs K and N in multiples of {ALIGNMENT}, as torch._scaled_mm on GPUs; got "
            f"K={k}, N={n}: pad the weight and the input with zeros to the next multiple"
        )
    if a_stride[1] != 1 or b_stride[0] != 1:
        raise ArgumentError(
            f"scaled_mm takes a row-major a and a column-major b, as torch._scaled_mm: got a {_describe(a)} "
            f"and b {_describe(b)}; pass b = w.t() of a row-major weight w (N, K), and a.contiguous()"
        )
    _check_scales(scale_a, scale_b, m, n)
    if bias is not None:
        if not isinstance(bias, (torch.Tensor, TensorSpec)):
            raise ArgumentError(f"scaled_mm's bias must be a tensor or None, got {_describe(bias)}")
        if tuple(_layout(bias)[0]) != (n,) or bias.dtype != out_dtype:
            raise ArgumentError(
                f"scaled_mm takes a bias of N={n} values of the output dtype "
                f"{str(out_dtype).removeprefix('torch.')}, as torch._scaled_mm on GPUs; got {_describe(bias)}"
            )
    return m, n


def _check_scales(scale_a: Any, scale_b: Any, m: Any, n: Any) -> None:
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        raise ArgumentError(
            f"scaled_mm's scales are float32, got scale_a {_describe(scale_a)} and scale_b "
            f"{_describe(scale_b)}: pass scale.float()"
        )
    (a_size, a_stride), (b_size, b_stride) = _layout(scale_a), _layout(scale_b)
    per_tensor = _count(a_size) == 1 and _count(b_size) == 1
    per_row = tuple(a_size) == (m, 1) and tuple(b_size) == (1, n)
    if not (per_tensor or per_row):
        raise ArgumentError(
            f"scaled_mm takes both scales per tensor (one value each) or both per row (scale_a ({m}, 1), "
            f"scale_b (1, {n})), as torch._scaled_mm; got scale_a {_describe(scale_a)} and scale_b "
            f"{_describe(scale_b)}: expand a per-tensor scale to the other's form, e.g. "
            "scale.expand(M, 1).contiguous()"
        )
    if per_row and not per_tensor and (a_stride[0] != 1 or b_stride[1] != 1):
        raise ArgumentError(
            f"scaled_mm takes contiguous per-row scales, as torch._scaled_mm; got scale_a "
            f"{_describe(scale_a)} and scale_b {_describe(scale_b)}: pass scale.contiguous()"
        )


def _count(size: Sequence[Any]) -> Any:
    count = 1
    for extent in size:
        count *= extent
    return count


class ArgumentCheck:
    """The first choice space of each `scaled_mm` selector: it offers no choice, and checks the
    arguments of a signature the selector meets for the first time (the hot path checks nothing):
    `choices_for` raises `ArgumentError`, saying what is wrong with the call."""

    name = "argument check"

    def __init__(self, out_dtype: torch.dtype) -> None:
        self.out_dtype = out_dtype

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        a, b, scale_a, scale_b, *bias = signature.inputs
        check_arguments(a, b, scale_a, scale_b, bias[0] if bias else None, self.out_dtype)
        return []

    def __repr__(self) -> str:
        return "ArgumentCheck()"


def example_inputs(*inputs: torch.Tensor) -> list[torch.Tensor]:
    """Example inputs of a quantized layer: fp8 A and B and a bias from the standard normal (as
    Selector's own examples), and positive scales of about K**-0.25 each, so that the product, like the
    bias, has a root mean square of about 1 and a kernel that drops or misplaces the bias or a scale
    fails verification, whichever the tolerance."""
    a, b, scale_a, scale_b, *bias = inputs
    generator = example_generator(a.device)
    made = [example_tensor(TensorSpec.of(t), generator) for t in (a, b)]
    k = int(a.shape[1])
    for scale in (scale_a, scale_b):
        example = example_tensor(TensorSpec.of(scale), generator)
        values = torch.rand(example.shape, generator=generator, device=example.device, dtype=torch.float32)
        example.copy_(values.add_(0.5).mul_(k**-0.25))
        made.append(example)
    made += [example_tensor(TensorSpec.of(t), generator) for t in bias]
    return made


def _constants(fast: bool) -> Callable[[Signature], dict[str, Any]]:
    def constants(signature: Signature) -> dict[str, Any]:
        return {"FAST_ACCUM": fast, "NUM_SMS": signature.device.multiprocessors or 4}

    return constants


def _build(out_dtype: torch.dtype, bias: bool, fast: bool) -> Selector:
    fused = {
        "epilogue": _BIAS if bias else None,
        "arguments": ("A", "B", "SCALE_A", "SCALE_B", *(("bias",) if bias else ())),
    }
    suffix = "" if not bias else "[bias]"
    return Selector(
        "kernelpick.ops." + _name(out_dtype, bias, fast),
        [
            ArgumentCheck(out_dtype),
            extern(
                functools.partial(torch._scaled_mm, out_dtype=out_dtype, use_fast_accum=fast),
                name="torch._scaled_mm" + suffix,
            ),
            builtin_template(
                scaled_gemm(out_dtype), scaled_gemm_configs, _constants(fast), "triton_scaled_mm", **fused
            ),
            builtin_template(
                persistent_tma_scaled_gemm(out_dtype),
                persistent_scaled_gemm_configs,
                _constants(fast),
                "triton_scaled_mm_tma",
                **fused,
            ),
        ],
        input_gen=example_inputs,
        tolerance=fp8_product_tolerance(out_dtype, fast_accumulation=fast),
    )


register_selectors({_name(*v): functools.partial(_build, *v) for v in _VARIANTS})


def _scaled_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    out_dtype: torch.dtype | None = None,
    use_fast_accum: bool = False,
) -> torch.Tensor:
    """The selection, which the operator runs (`scaled_mm` repeats these lines: a call less)."""
    name = _NAMES.get((out_dtype, bias is not None, use_fast_accum))
    if name is None:
        raise _unsupported(out_dtype, bias is not None)
    if bias is None:
        out: torch.Tensor = (_hot.get(name) or hot_path(name, 4))(a, b, scale_a, scale_b)
    else:
        out = (_hot.get(name) or hot_path(name, 5))(a, b, scale_a, scale_b, bias)
    return out


def _scaled_mm_pick(*args: Any, **kwargs: Any) -> Callable[..., Any] | None:
    """What a compiled graph runs in `_scaled_mm`'s place for inputs like these (tuning first if
    needed), given `_scaled_mm`'s arguments."""
    bias = _bias(args, kwargs)
    name = _NAMES.get((kwargs.get("out_dtype"), bias is not None, kwargs.get("use_fast_accum", False)))
    if name is None:
        return None
    inputs = (*args[:4], *(() if bias is None else (bias,)))
    call = traceable_pick(_selectors.get(name) or ops_selector(name), *inputs)
    if call is None:
        return None

    def picked(*args: Any, **kwargs: Any) -> Any:  # the operator's arguments; out_dtype is the selector's
        bias = _bias(args, kwargs)
        return call(*args[:4], *(() if bias is None else (bias,)))

    return picked


def _bias(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[4] if len(args) > 4 else kwargs.get("bias")


def _scaled_mm_fake(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    out_dtype: torch.dtype | None = None,
    use_fast_accum: bool = False,
) -> torch.Tensor:
    if (out_dtype, bias is not None, use_fast_accum) not in _NAMES:
        raise _unsupported(out_dtype, bias is not None)
    assert out_dtype is not None
    m, n = check_arguments(a, b, scale_a, scale_b, bias, out_dtype)
    return a.new_empty((m, n), dtype=out_dtype)


_SCALED_MM = define_operator(
    "kernelpick::scaled_mm",
    _scaled_mm,
    schema=(
        "(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias=None, *, "
        "ScalarType? out_dtype=None, bool use_fast_accum=False) -> Tensor"
    ),
    fake=_scaled_mm_fake,
    pick=_scaled_mm_pick,
)


def scaled_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    out_dtype: torch.dtype | None = None,
    use_fast_accum: bool = False,
) -> torch.Tensor:
    """`(a @ b) * scale_a * scale_b + bias` of float8 matrices, as `torch._scaled_mm`, by the fastest
    correct choice for these inputs.

    Choices: `torch._scaled_mm` (the reference), the tiled Triton fp8 template and, on sm_90+ GPUs,
    the persistent TMA template; templates need sm_89+ (fp8 tensor cores). Outputs are verified
    against torch's with `fp8_product_tolerance`. Under `torch.compile`,
    `torch.export` or fake tensors it is the operator `torch.ops.kernelpick.scaled_mm`.

    Args:
        a: (M, K) float8_e4m3fn, row-major (the activations).
        b: (K, N) float8_e4m3fn, column-major: `w.t()` of a row-major weight w (N, K), as
            torch._scaled_mm takes it; the product is `a @ w.T`. K and N are multiples of 16.
        scale_a: float32, one value (per tensor) or (M, 1) (per row).
        scale_b: float32, one value or (1, N) (per column of b, i.e. per row of w), per tensor or per
            row as `scale_a` is.
        bias: None or (N,) of the output dtype (bf16 or fp16 outputs only).
        out_dtype: torch.bfloat16, torch.float16 or torch.float32 (required: float8 outputs are not
            supported).
        use_fast_accum: accumulate in the fp8 tensor cores along all of K, faster and less accurate
            on sm_90 (torch's meaning); the templates then do the same.

    Raises:
        ArgumentError: inputs torch._scaled_mm would not take on a GPU, or unsupported ones; the
            message says what was expected.
    """
    if dynamo_tracing() or dispatch_modes():
        traced: torch.Tensor = _SCALED_MM(
            a, b, scale_a, scale_b, bias, out_dtype=out_dtype, use_fast_accum=use_fast_accum
        )
        return traced
    name = _NAMES.get((out_dtype, bias is not None, use_fast_accum))
    if name is None:
        raise _unsupported(out_dtype, bias is not None)
    if bias is None:
        out: torch.Tensor = (_hot.get(name) or hot_path(name, 4))(a, b, scale_a, scale_b)
    else:
        out = (_hot.get(name) or hot_path(name, 5))(a, b, scale_a, scale_b, bias)
    return out
