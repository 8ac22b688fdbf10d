"""Tests of output verification with dtype-aware tolerances."""

from __future__ import annotations

import pytest
import torch

from kernelpick.bench.verify import (
    FP8_FAST_ACCUMULATION_TOLERANCE,
    FP8_PRODUCT_TOLERANCE,
    TF32_TOLERANCE,
    Expected,
    Tolerance,
    fp8_product_tolerance,
    tolerance_for,
)


def matmul_pair(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two correct products that sum in different orders, rounded to `dtype`."""
    a, b = torch.randn(64, 512, dtype=torch.float64), torch.randn(512, 64, dtype=torch.float64)
    exact = a @ b
    reordered = (a[:, :256] @ b[:256]) + (a[:, 256:] @ b[256:])
    return reordered.to(dtype), exact.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_rounding_differences_of_correct_results_pass(dtype: torch.dtype) -> None:
    got, want = matmul_pair(dtype)
    assert Expected(want).why(got) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_wrong_element_fails(dtype: torch.dtype) -> None:
    got, want = matmul_pair(dtype)
    got[3, 7] += 0.5 * float(want.float().abs().mean()) + 1
    reason = Expected(want).why(got)
    assert reason is not None and "1 of 4096 values" in reason


def test_tolerances_grow_with_coarser_dtypes_and_tf32() -> None:
    order = [tolerance_for(d) for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16)]
    assert all(t is not None for t in order)
    assert [t.rtol for t in order if t] == sorted(t.rtol for t in order if t)
    assert tolerance_for(torch.float32, tf32=True) == TF32_TOLERANCE
    assert tolerance_for(torch.int32) is None


def test_nan_never_passes_even_where_the_reference_is_nan() -> None:
    want = torch.ones(4)
    got = want.clone()
    got[1] = float("nan")
    assert "1 NaN" in (Expected(want).why(got) or "")
    both = torch.full((4,), float("nan"))
    assert "cannot be verified" in (Expected(both).why(both) or "")


def test_infinities_must_match() -> None:
    want = torch.tensor([1.0, float("inf")])
    assert Expected(want).why(want.clone()) is None
    assert "infinities" in (Expected(want).why(torch.tensor([1.0, 2.0])) or "")


def test_sizes_dtypes_and_structure_must_match() -> None:
    x = torch.ones(2, 3)
    assert "size [3, 2]" in (Expected(x).why(x.t()) or "")
    assert "dtype torch.float64" in (Expected(x).why(x.double()) or "")
    assert "a tuple of 1" in (Expected((x, x)).why((x,)) or "")
    assert Expected((x, [x])).why((x, [x])) is None
    assert "output[1]" in (Expected((x, x)).why((x, x + 1)) or "")
    assert "a int" in (Expected(x).why(1) or "")


def test_integers_must_be_equal() -> None:
    x = torch.arange(6)
    assert Expected(x).why(x.clone()) is None
    assert "differs in 1 of 6" in (Expected(x).why(x + (x == 2)) or "")


def test_a_given_tolerance_overrides_the_dtype_default() -> None:
    want = torch.ones(8)
    got = want + 1e-3
    assert Expected(want).why(got) is not None
    assert Expected(want, Tolerance(1e-2, 0.0)).why(got) is None


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


def test_tf32_allowed_follows_the_legacy_flag_and_fp32_precision_alike() -> None:
    import warnings

    from kernelpick.bench.verify import tf32_allowed

    matmul = torch.backends.cuda.matmul
    before, legacy_before = matmul.fp32_precision, tf32_allowed()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch deprecates the legacy flag
            for allowed in (True, False):
                matmul.allow_tf32 = allowed
                assert tf32_allowed() is allowed
            for precision, allowed in (("tf32", True), ("ieee", False)):
                matmul.fp32_precision = precision  # then the legacy flag refuses to be read
                assert tf32_allowed() is allowed
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            matmul.fp32_precision = before
            matmul.allow_tf32 = legacy_before
    assert matmul.allow_tf32 is legacy_before  # readable again, as other code reads it


def test_a_reference_is_prepared_once_for_every_output_checked_against_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    widened: list[torch.Size] = []
    widen = Expected._widen

    def counting(tensor: torch.Tensor) -> torch.Tensor:
        widened.append(tensor.shape)
        return widen(tensor)

    monkeypatch.setattr(Expected, "_widen", staticmethod(counting))
    want = torch.randn(64, 32).to(torch.bfloat16)
    want[0, 0] = float("inf")  # its finite values and their mask are kept too
    expected = Expected(want)
    outputs = [want.clone() for _ in range(3)]
    outputs[1][5, 5] += 1.0
    reasons = [expected.why(output) for output in outputs]
    assert reasons[0] is None and reasons[2] is None
    assert reasons[1] is not None and "differs from the reference in 1 of 2047 values" in reasons[1]
    assert len(widened) == 1 + len(outputs)  # the reference once, each output once
    assert reasons == [Expected(want).why(output) for output in outputs]  # what one prepared per output says
