"""Tests of kernelpick.ops.scaled_mm on CPU: the fp8 templates run in Triton's interpreter (which
computes fp8 dots exactly in float32) against a dequantize-then-multiply reference, the selection
against torch._scaled_mm, and the argument checks."""

from __future__ import annotations

import functools

import pytest
import torch

from kernelpick import Config, Selector, extern, ops, template
from kernelpick.bench.verify import Expected, Tolerance, tolerance_for
from kernelpick.engine.record import SelectionRecord
from kernelpick.engine.signature import Signature
from kernelpick.errors import ArgumentError
from kernelpick.ops.scaled_mm import (
    _BIAS,
    FP8_FAST_ACCUMULATION_TOLERANCE,
    FP8_PRODUCT_TOLERANCE,
    example_inputs,
    fp8_product_tolerance,
    selector_name,
)
from kernelpick.ops.scaled_mm_templates import (
    INPUTS,
    PERSISTENT_TMA_SCALED_GEMM_SOURCE,
    _output_rule,
    _persistent_grid,
    scaled_gemm,
)
from kernelpick.select.template import TritonTemplate
from kernelpick.select.template_choice import TemplateChoice

FP8 = torch.float8_e4m3fn
ARGUMENTS = ("A", "B", "SCALE_A", "SCALE_B", "bias")
#: The persistent TMA source without its sm_90 requirement, so that it runs in the interpreter.
INTERPRETED_TMA = TritonTemplate(
    "interpreted_scaled_gemm_tma",
    PERSISTENT_TMA_SCALED_GEMM_SOURCE,
    inputs=INPUTS,
    output=_output_rule(torch.bfloat16),
    grid=_persistent_grid,
)


def operands(
    m: int, n: int, k: int, *, per_row: bool, out_dtype: torch.dtype = torch.bfloat16, seed: int = 0
) -> tuple[torch.Tensor, ...]:
    """a (M, K), b = w.t() (K, N) column-major, scales of either kind, a bias of the output dtype."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=generator).clamp(-4, 4).to(FP8)
    w = torch.randn(n, k, generator=generator).clamp(-4, 4).to(FP8)
    if per_row:
        scale_a, scale_b = (
            torch.rand(m, 1, generator=generator) + 0.5,
            torch.rand(1, n, generator=generator) + 0.5,
        )
    else:
        scale_a, scale_b = torch.tensor(0.75), torch.tensor(1.25)
    bias = torch.randn(n, generator=generator).to(out_dtype)
    return a, w.t(), scale_a, scale_b, bias


def dequantized(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The float32 reference: the exact fp8 values times their scales, multiplied in float32."""
    out = (a.float() @ b.float()) * scale_a * scale_b
    return out if bias is None else out + bias.float()


def run_template(
    tmpl: TritonTemplate, config: Config, inputs: tuple[torch.Tensor, ...], *, fast: bool = False
) -> torch.Tensor:
    """One config of `tmpl`, rendered for `inputs` and launched in the interpreter."""
    bias = len(inputs) == 5
    space = template(
        tmpl,
        configs=[config],
        epilogue=_BIAS if bias else None,
        arguments=ARGUMENTS[: len(inputs)],
        constants={"FAST_ACCUM": fast, "NUM_SMS": 3},
    )
    signature = Signature.of(inputs, {})
    (choice,) = space.choices_for(signature)
    assert isinstance(choice, TemplateChoice)
    out: torch.Tensor = choice.callable_for(signature)(*inputs)
    return out


def tile(block_m: int, block_n: int, block_k: int) -> Config:
    return Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 2}, num_warps=4)


def record_of(name: str) -> SelectionRecord:
    record = ops.selector(name).last_selection
    assert record is not None
    return record


@pytest.mark.parametrize(
    ("m", "n", "k"),
    [(1, 48, 80), (5, 16, 16), (33, 80, 48), (64, 32, 96)],
    ids=["M=1", "K=16", "odd-M-K-not-a-tile", "even"],
)
@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
@pytest.mark.parametrize("bias", [False, True], ids=["", "bias"])
@pytest.mark.parametrize("fast", [False, True], ids=["precise", "fast"])
def test_the_tiled_template_computes_the_scaled_product(
    m: int, n: int, k: int, per_row: bool, bias: bool, fast: bool
) -> None:
    inputs = operands(m, n, k, per_row=per_row)
    used = inputs if bias else inputs[:4]
    out = run_template(scaled_gemm(torch.bfloat16), tile(16, 16, 32), used, fast=fast)
    assert out.dtype == torch.bfloat16 and out.shape == (m, n) and out.stride() == (n, 1)
    # The interpreter multiplies the fp8 values exactly and sums in float32: only bf16 rounding remains.
    torch.testing.assert_close(out.float(), dequantized(*used), rtol=8e-3, atol=1e-2)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_the_tiled_template_writes_each_output_dtype(out_dtype: torch.dtype) -> None:
    inputs = operands(20, 32, 64, per_row=True, out_dtype=out_dtype)
    used = inputs if out_dtype != torch.float32 else inputs[:4]
    out = run_template(scaled_gemm(out_dtype), tile(16, 32, 32), used)
    assert out.dtype == out_dtype
    tolerance = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5}[out_dtype]
    torch.testing.assert_close(out.float(), dequantized(*used), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
def test_the_persistent_tma_source_computes_the_scaled_product_in_the_interpreter(per_row: bool) -> None:
    # More tiles (5 x 3) than programs (3), and M, K not multiples of the tile: each program walks
    # several tiles and the descriptors pad the edges with zeros.
    inputs = operands(70, 48, 80, per_row=per_row)
    out = run_template(INTERPRETED_TMA, tile(16, 16, 32), inputs)
    torch.testing.assert_close(out.float(), dequantized(*inputs), rtol=8e-3, atol=1e-2)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
def test_scaled_mm_matches_torch_and_its_templates_pass_verification(
    out_dtype: torch.dtype, per_row: bool
) -> None:
    a, b, scale_a, scale_b, bias = operands(33, 48, 80, per_row=per_row, out_dtype=out_dtype)
    bias_or_none = None if out_dtype == torch.float32 else bias
    out = ops.scaled_mm(a, b, scale_a, scale_b, bias_or_none, out_dtype=out_dtype)
    expected = torch._scaled_mm(a, b, scale_a, scale_b, bias_or_none, out_dtype=out_dtype)
    assert out.dtype == out_dtype and out.shape == (33, 48)
    torch.testing.assert_close(
        out, expected, rtol=1.6e-2, atol=1e-2 * float(expected.float().pow(2).mean().sqrt())
    )
    record = record_of(selector_name(out_dtype, bias=bias_or_none is not None))
    names = [r.name for r in record.candidates]
    assert sum(name.startswith("triton_scaled_mm") for name in names) == 2  # the interpreter's configs
    assert all(r.result.ok for r in record.candidates), [
        (r.name, r.result.message) for r in record.candidates
    ]
    assert [s.name for s in record.skipped] == ["triton_scaled_mm_tma"]  # no TMA on a CPU


def test_fast_accumulation_has_a_selector_of_its_own() -> None:
    a, b, scale_a, scale_b, bias = operands(16, 32, 64, per_row=False)
    out = ops.scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16, use_fast_accum=True)
    torch.testing.assert_close(out.float(), dequantized(a, b, scale_a, scale_b, bias), rtol=8e-3, atol=1e-2)
    name = selector_name(torch.bfloat16, bias=True, use_fast_accum=True)
    assert name == "scaled_mm_bias_fast_bf16"
    assert all(r.result.ok for r in record_of(name).candidates)


def test_a_kernel_that_drops_the_bias_fails_verification_even_with_fast_accumulation() -> None:
    """The example inputs make the product and the bias of one size, so that the loosest fp8
    tolerance still sees a missing bias."""
    inputs = operands(16, 32, 64, per_row=True)
    dropping = template(
        scaled_gemm(torch.bfloat16),
        configs=[tile(16, 16, 32)],
        arguments=ARGUMENTS,
        constants={"FAST_ACCUM": True, "NUM_SMS": 3},
        name="no_bias",
    )
    reference = functools.partial(torch._scaled_mm, out_dtype=torch.bfloat16, use_fast_accum=True)
    selector = Selector(
        "drops the bias",
        [extern(reference, name="torch._scaled_mm"), dropping],
        input_gen=example_inputs,
        tolerance=FP8_FAST_ACCUMULATION_TOLERANCE,
    )
    record = selector.tune(*inputs)
    results = {r.name.split(" ")[0]: r.result for r in record.candidates}
    assert results["no_bias"].status == "wrong_result"
    assert record.best == "torch._scaled_mm"


def test_example_inputs_have_the_call_s_layout_and_positive_scales_of_unit_product() -> None:
    a, b, scale_a, scale_b, bias = operands(8, 32, 256, per_row=True)
    made = example_inputs(a, b, scale_a, scale_b, bias)
    for real, example in zip((a, b, scale_a, scale_b, bias), made, strict=True):
        assert (example.dtype, example.shape, example.stride()) == (real.dtype, real.shape, real.stride())
    assert bool((made[2] > 0).all()) and bool((made[3] > 0).all())
    product = dequantized(*made[:4], None)
    assert 0.5 < float(product.pow(2).mean().sqrt()) < 2.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a, b, sa, sb, bias: (a.float(), b, sa, sb, bias), "multiplies float8_e4m3fn matrices"),
        (lambda a, b, sa, sb, bias: (a, b.contiguous(), sa, sb, bias), "row-major a and a column-major b"),
        (lambda a, b, sa, sb, bias: (a[:, :40], b[:40], sa, sb, bias), "K and N in multiples of 16"),
        (lambda a, b, sa, sb, bias: (a, b, sa, torch.rand(1, 48), bias), "both scales per tensor"),
        (lambda a, b, sa, sb, bias: (a, b, sa.double(), sb, bias), "scales are float32"),
        (
            lambda a, b, sa, sb, bias: (a, b, sa, sb, bias.float()),
            "a bias of N=48 values of the output dtype",
        ),
        (lambda a, b, sa, sb, bias: (a, b, 0.5, sb, bias), "scale_a must be a tensor"),
    ],
    ids=["bf16-a", "row-major-b", "K=40", "mixed-scales", "float64-scale", "float32-bias", "float-scale"],
)
def test_wrong_arguments_are_refused_before_anything_compiles(change, message: str) -> None:  # type: ignore[no-untyped-def]
    inputs = change(*operands(16, 48, 64, per_row=False))
    selections = len(ops.selector("scaled_mm_bias_bf16").records)
    with pytest.raises(ArgumentError, match=message):
        ops.scaled_mm(*inputs, out_dtype=torch.bfloat16)
    assert len(ops.selector("scaled_mm_bias_bf16").records) == selections


def test_output_dtypes_torch_scaled_mm_does_not_write_on_gpus_are_refused() -> None:
    a, b, scale_a, scale_b, bias = operands(16, 48, 64, per_row=False)
    with pytest.raises(ArgumentError, match="needs out_dtype="):
        ops.scaled_mm(a, b, scale_a, scale_b)
    with pytest.raises(ArgumentError, match=r"got out_dtype=torch\.float8_e4m3fn"):
        ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=FP8)
    with pytest.raises(ArgumentError, match="a bias only with a bf16 or fp16 output"):
        ops.scaled_mm(a, b, scale_a, scale_b, bias.float(), out_dtype=torch.float32)


def test_the_selectors_are_found_by_name() -> None:
    assert ops.selector("scaled_mm_fp16").name == "kernelpick.ops.scaled_mm_fp16"
    assert selector_name(torch.float32, use_fast_accum=True) == "scaled_mm_fast_fp32"
    with pytest.raises(Exception, match="scaled_mm_bias_fast_fp16"):
        ops.selector("scaled_mm_bias_fp32")  # fp32 outputs take no bias: no such selector


@pytest.mark.usefixtures("either_shapes")
@pytest.mark.parametrize(("m", "n", "k"), [(1, 48, 80), (33, 48, 80)])
def test_with_sizes_passed_or_baked_scaled_mm_matches_torch_and_its_templates_pass_verification(
    m: int, n: int, k: int
) -> None:
    a, b, scale_a, scale_b, bias = operands(m, n, k, per_row=True)
    out = ops.scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16)
    expected = torch._scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16)
    torch.testing.assert_close(
        out, expected, rtol=1.6e-2, atol=1e-2 * float(expected.float().pow(2).mean().sqrt())
    )
    record = record_of(selector_name(torch.bfloat16, bias=True))
    assert sum(r.name.startswith("triton_scaled_mm") for r in record.candidates) == 2
    assert all(r.result.ok for r in record.candidates), [
        (r.name, r.result.message) for r in record.candidates
    ]


def test_by_default_one_source_serves_shapes_whose_tiles_fit_alike() -> None:
    def sources(m: int, n: int, k: int) -> dict[str, str]:
        a, b, scale_a, scale_b, _ = operands(m, n, k, per_row=True)
        selector = ops.selector(selector_name(torch.bfloat16, bias=False))
        described = [c.description() for c in selector.choices_for(a, b, scale_a, scale_b)]
        return {d["name"]: d["source_sha256"] for d in described if d["kind"] == "template"}

    first, second = sources(16, 32, 64), sources(32, 64, 64)
    shared = first.keys() & second.keys()
    assert shared and all(first[name] == second[name] for name in shared)


def truncated(x: torch.Tensor, bits: int = 14) -> torch.Tensor:
    """`x` with its significand truncated to `bits` bits, toward zero."""
    significand, exponent = torch.frexp(x)
    return torch.ldexp(torch.trunc(significand * 2**bits) / 2**bits, exponent)


def tensor_core_product(a: torch.Tensor, b: torch.Tensor, slice_k: int) -> torch.Tensor:
    """`a @ b` as the emulated fp8 tensor cores of docs/measurement.md "Checking outputs" sum it: 32-deep
    steps into a 14-bit accumulator, promoted into a float32 sum every `slice_k`."""
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
    for start in range(0, a.shape[1], slice_k):
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
        for k in range(start, min(a.shape[1], start + slice_k), 32):
            acc = truncated(acc + a[:, k : k + 32] @ b[k : k + 32])
        out += acc.float()
    return out


def test_fp8_products_pass_their_tolerance_with_either_accumulation() -> None:
    """The figures of the comments of FP8_PRODUCT_TOLERANCE and FP8_FAST_ACCUMULATION_TOLERANCE: at
    K = 28672 the emulated slice-promoted product passes 1 % of the RMS, the one accumulated along all
    of K only the fast-accumulation tolerance."""
    generator = torch.Generator().manual_seed(0)
    k = 28672
    a = torch.randn(16, k, generator=generator).clamp(-4, 4).to(torch.float8_e4m3fn).double()
    b = torch.randn(k, 64, generator=generator).clamp(-4, 4).to(torch.float8_e4m3fn).double()
    exact = (a @ b).float()
    promoted, fast = tensor_core_product(a, b, 512), tensor_core_product(a, b, k)
    assert Expected(exact, Tolerance(1e-3, 1e-3)).why(promoted) is None
    assert Expected(exact, FP8_PRODUCT_TOLERANCE).why(fast) is not None
    assert Expected(exact, FP8_FAST_ACCUMULATION_TOLERANCE).why(fast) is None


def test_fp8_product_tolerance_is_the_looser_of_the_output_dtype_and_the_accumulation() -> None:
    bf16 = tolerance_for(torch.bfloat16)
    assert bf16 is not None
    assert fp8_product_tolerance(torch.bfloat16) == Tolerance(bf16.rtol, FP8_PRODUCT_TOLERANCE.atol)
    assert fp8_product_tolerance(torch.float32) == FP8_PRODUCT_TOLERANCE  # float32's own is 1e-4
    assert fp8_product_tolerance(torch.float16, fast_accumulation=True) == FP8_FAST_ACCUMULATION_TOLERANCE
