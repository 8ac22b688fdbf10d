"""Tests of output verification with dtype-aware tolerances."""

from __future__ import annotations

import pytest
import torch

from kernelpick.bench.verify import (
    TF32_TOLERANCE,
    Expected,
    Tolerance,
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
