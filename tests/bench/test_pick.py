"""bench/pick.py: the fastest wins only when it beats the reference by more than the measured spread."""

from __future__ import annotations

import pytest

from kernelpick.bench.pick import pick
from kernelpick.bench.result import BenchmarkResult, TimingSummary


def result(median: float, spread: float = 0.0, host: float | None = None) -> BenchmarkResult:
    """A result whose runs vary by `spread` (half the interquartile range over the median)."""
    iqr = 2 * spread * median
    timing = TimingSummary(median, median, median - iqr, median + iqr, iqr, 10, 0).with_host(host)
    return BenchmarkResult("ok", timing)


def test_without_a_reference_the_fastest_wins() -> None:
    chosen = pick({"a": result(2.0), "b": result(1.0), "c": result(3.0)})
    assert chosen.best == chosen.fastest == "b"
    assert chosen.note == ""


def test_a_clear_win_replaces_the_reference() -> None:
    chosen = pick({"cublas": result(1.0, 0.01), "triton": result(0.9, 0.01)}, "cublas")
    assert chosen.best == "triton" and chosen.note == ""


def test_a_win_inside_the_spread_keeps_the_reference_and_says_why() -> None:
    chosen = pick({"cublas": result(1.0, 0.02), "triton": result(0.99, 0.005)}, "cublas")
    assert chosen.best == "cublas" and chosen.fastest == "triton"
    assert chosen.note == (
        "kept the reference cublas: triton was 1.0 % faster, within the measured spread of 2.0 %"
    )


def test_the_larger_spread_of_the_two_counts() -> None:
    kept = pick({"ref": result(2.0, 0.03), "new": result(1.95, 0.01)}, "ref")
    assert kept.best == "ref" and kept.note.endswith("2.5 % faster, within the measured spread of 3.0 %")
    assert pick({"ref": result(1.0, 0.001), "new": result(0.97, 0.04)}, "ref").best == "ref"


def test_the_device_time_ranks_and_the_host_time_does_not() -> None:
    # As in an fp8 selection on an H100: torch._scaled_mm 9.8 µs on the device, its host time read at
    # 23.5 µs a call (15.0 µs in another process); a Triton GEMM 13.4 µs, host 17.7 µs.
    scaled_mm = result(0.0098, 0.01, host=0.0235)
    triton = result(0.0134, 0.01, host=0.0177)
    assert pick({"torch._scaled_mm": scaled_mm, "triton": triton}).best == "torch._scaled_mm"
    assert pick({"torch._scaled_mm": scaled_mm, "triton": triton}, "triton").best == "torch._scaled_mm"


def test_a_failed_reference_is_no_reference() -> None:
    failed = BenchmarkResult.failed("runtime_error", "boom")
    assert pick({"ref": failed, "new": result(1.0)}, "ref").best == "new"


def test_nothing_that_worked_is_an_error() -> None:
    with pytest.raises(ValueError, match="no candidate worked"):
        pick({"a": BenchmarkResult.failed("timeout", "hung")})
