"""GPU checks of kernelpick.ops.scaled_mm (marked `gpu`: skipped without one; fp8 needs sm_89+): every
template config compiles, verifies against torch._scaled_mm and runs; TMA configs appear on sm_90+;
how far real fp8 accumulators land from the exact product, against the fp8 tolerances."""

from __future__ import annotations

import pytest
import torch

from kernelpick import ops
from kernelpick.engine.record import SelectionRecord
from kernelpick.ops.scaled_mm import fp8_product_tolerance, selector_name

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9),
        reason="fp8 tensor cores need sm_89 or newer",
    ),
]
FP8 = torch.float8_e4m3fn


def operands(m: int, n: int, k: int, *, per_row: bool, out_dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Inputs as a quantized layer has them: values scaled into fp8's range, positive scales."""
    generator = torch.Generator(device="cuda").manual_seed(m + n + k)
    x = torch.randn(m, k, device="cuda", generator=generator)
    w = torch.randn(n, k, device="cuda", generator=generator)
    if per_row:
        scale_x, scale_w = x.abs().amax(dim=1, keepdim=True) / 448, w.abs().amax(dim=1, keepdim=True) / 448
        scale_a, scale_b = scale_x, scale_w.t().contiguous()
    else:
        scale_x, scale_w = x.abs().max() / 448, w.abs().max() / 448
        scale_a, scale_b = scale_x, scale_w
    bias = torch.randn(n, device="cuda", generator=generator).to(out_dtype)
    return (x / scale_x).to(FP8), (w / scale_w).to(FP8).t(), scale_a, scale_b, bias


def exact(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    return (a.double() @ b.double()) * scale_a.double() * scale_b.double()


def least_tolerance(out: torch.Tensor, expected: torch.Tensor) -> float:
    """The least t with |out - expected| <= t * (rms + |expected|): what rtol = atol = t must be."""
    rms = expected.pow(2).mean().sqrt()
    return float(((out.double() - expected).abs() / (rms + expected.abs())).max())


def record_of(name: str) -> SelectionRecord:
    record = ops.selector(name).last_selection
    assert record is not None
    return record


def failures(record: SelectionRecord) -> dict[str, str]:
    """Choices that failed for a reason other than needing more shared memory than the GPU has."""
    return {
        r.name: f"{r.result.status}: {r.result.message[:300]}"
        for r in record.candidates
        if r.result.status not in ("ok", "out_of_resources")
    }


@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
@pytest.mark.parametrize("m", [1, 16, 256])
def test_scaled_mm_on_a_gpu(m: int, per_row: bool) -> None:
    a, b, scale_a, scale_b, bias = operands(m, 1024, 2048, per_row=per_row, out_dtype=torch.bfloat16)
    out = ops.scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16)
    expected = torch._scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16)
    rms = float(expected.float().pow(2).mean().sqrt())
    torch.testing.assert_close(out, expected, rtol=1.6e-2, atol=1e-2 * rms)
    record = record_of(selector_name(torch.bfloat16, bias=True))
    assert failures(record) == {}
    templates = [r.name for r in record.candidates if r.name.startswith("triton_scaled_mm")]
    assert templates
    if torch.cuda.get_device_capability() >= (9, 0) and m >= 64:
        assert any(name.startswith("triton_scaled_mm_tma") for name in templates)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
def test_other_output_dtypes_on_a_gpu(out_dtype: torch.dtype) -> None:
    a, b, scale_a, scale_b, bias = operands(128, 512, 1024, per_row=False, out_dtype=out_dtype)
    bias_or_none = None if out_dtype == torch.float32 else bias
    out = ops.scaled_mm(a, b, scale_a, scale_b, bias_or_none, out_dtype=out_dtype)
    assert out.dtype == out_dtype
    assert failures(record_of(selector_name(out_dtype, bias=bias_or_none is not None))) == {}


@pytest.mark.parametrize("fast", [False, True], ids=["precise", "fast"])
def test_real_fp8_accumulators_fit_the_fp8_tolerances(fast: bool) -> None:
    """Every choice verifies at K = 14336; prints how close each one and torch come to the exact
    product (the figures FP8_PRODUCT_TOLERANCE and FP8_FAST_ACCUMULATION_TOLERANCE rest on)."""
    a, b, scale_a, scale_b, _ = operands(128, 1024, 14336, per_row=True, out_dtype=torch.bfloat16)
    selector = ops.selector(selector_name(torch.float32, use_fast_accum=fast))
    record = selector.tune(a, b, scale_a, scale_b)
    assert failures(record) == {}
    expected = exact(a, b, scale_a, scale_b)
    torch_out = torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.float32, use_fast_accum=fast)
    needed = {"torch._scaled_mm": least_tolerance(torch_out, expected)}
    for choice in selector.choices_for(a, b, scale_a, scale_b):
        result = next(r.result for r in record.candidates if r.name == choice.name)
        if result.ok:
            needed[choice.name] = least_tolerance(
                choice.callable_for(record.signature)(a, b, scale_a, scale_b), expected
            )
    print(
        "\nleast rtol = atol against the exact product, K = 14336:",
        {n: f"{t:.2e}" for n, t in needed.items()},
    )
    assert max(needed.values()) <= fp8_product_tolerance(torch.float32, fast_accumulation=fast).atol
