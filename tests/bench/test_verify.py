"""Tests of output verification with dtype-aware tolerances."""

from __future__ import annotations

import pytest
import torch

from kernelpick.bench.verify import TF32_TOLERANCE, Tolerance, compare, tolerance_for


def matmul_pair(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two correct products that sum in different orders, rounded to `dtype`."""
    a, b = torch.randn(64, 512, dtype=torch.float64), torch.randn(512, 64, dtype=torch.float64)
    exact = a @ b
    reordered = (a[:, :256] @ b[:256]) + (a[:, 256:] @ b[256:])
    return reordered.to(dtype), exact.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_rounding_differences_of_correct_results_pass(dtype: torch.dtype) -> None:
    got, want = matmul_pair(dtype)
    assert compare(got, want) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_wrong_element_fails(dtype: torch.dtype) -> None:
    got, want = matmul_pair(dtype)
    got[3, 7] += 0.5 * float(want.float().abs().mean()) + 1
    reason = compare(got, want)
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
    assert "1 NaN" in (compare(got, want) or "")
    both = torch.full((4,), float("nan"))
    assert "cannot be verified" in (compare(both, both) or "")


def test_infinities_must_match() -> None:
    want = torch.tensor([1.0, float("inf")])
    assert compare(want.clone(), want) is None
    assert "infinities" in (compare(torch.tensor([1.0, 2.0]), want) or "")


def test_sizes_dtypes_and_structure_must_match() -> None:
    x = torch.ones(2, 3)
    assert "size [3, 2]" in (compare(x.t(), x) or "")
    assert "dtype torch.float64" in (compare(x.double(), x) or "")
    assert "a tuple of 1" in (compare((x,), (x, x)) or "")
    assert compare((x, [x]), (x, [x])) is None
    assert "output[1]" in (compare((x, x + 1), (x, x)) or "")
    assert "a int" in (compare(1, x) or "")


def test_integers_must_be_equal() -> None:
    x = torch.arange(6)
    assert compare(x.clone(), x) is None
    assert "differs in 1 of 6" in (compare(x + (x == 2), x) or "")


def test_a_given_tolerance_overrides_the_dtype_default() -> None:
    want = torch.ones(8)
    got = want + 1e-3
    assert compare(got, want) is not None
    assert compare(got, want, tolerance=Tolerance(1e-2, 0.0)) is None
