"""bench/pick.py: the fastest wins only when it beats the reference by more than the measured spread."""

from __future__ import annotations

import pytest

from kernelpick.bench.pick import host_tie, margin, pick
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.stats import TimingSummary


def result(median: float, spread: float = 0.0, host: float | None = None) -> BenchmarkResult:
    """A result whose runs vary by `spread` (half the interquartile range over the median)."""
    iqr = 2 * spread * median
    timing = TimingSummary(median, median, median - iqr, median + iqr, iqr, 10, 0).with_host(host)
    return BenchmarkResult("ok", timing)


def test_without_a_reference_the_fastest_wins() -> None:
    chosen = pick({"a": result(2.0), "b": result(1.0), "c": result(3.0)})
    assert chosen.best == chosen.fastest == "b"
    assert not chosen.kept_reference and chosen.note == ""


def test_a_clear_win_replaces_the_reference() -> None:
    chosen = pick({"cublas": result(1.0, 0.01), "triton": result(0.9, 0.01)}, "cublas")
    assert chosen.best == "triton" and chosen.note == ""


def test_a_win_inside_the_spread_keeps_the_reference_and_says_why() -> None:
    chosen = pick({"cublas": result(1.0, 0.02), "triton": result(0.99, 0.005)}, "cublas")
    assert chosen.best == "cublas" and chosen.fastest == "triton" and chosen.kept_reference
    assert chosen.note == (
        "kept the reference cublas: triton was 1.0 % faster, within the measured spread of 2.0 %"
    )


def test_the_larger_spread_of_the_two_counts() -> None:
    assert margin(result(1.0, 0.01), result(2.0, 0.03)) == pytest.approx(0.03)
    assert pick({"ref": result(1.0, 0.001), "new": result(0.97, 0.04)}, "ref").best == "ref"


def test_host_time_is_part_of_the_cost() -> None:
    # Fast on the device, but its calls take 30 µs of host time each: the library call is cheaper.
    chosen = pick({"cublas": result(0.019, 0.01, host=0.012), "triton": result(0.017, 0.01, host=0.030)})
    assert chosen.best == "cublas"


def test_a_failed_reference_is_no_reference() -> None:
    failed = BenchmarkResult.failed("runtime_error", "boom")
    assert pick({"ref": failed, "new": result(1.0)}, "ref").best == "new"


def test_only_eligible_candidates_win() -> None:
    results = {"a": result(1.0), "b": result(2.0)}
    assert pick(results, eligible=lambda name: name != "a").best == "b"


def test_nothing_that_worked_is_an_error() -> None:
    with pytest.raises(ValueError, match="no candidate worked"):
        pick({"a": BenchmarkResult.failed("timeout", "hung")})


def test_costs_the_host_decides_within_its_noise_are_a_tie_the_device_breaks() -> None:
    # The H100 fp8 selection: both calls host-bound at about 15 µs a call, 2.6 % apart on the host
    # (within how finely host times are known), 24 % apart on the device.
    scaled_mm = result(0.00977, 0.01, host=0.01495)
    triton = result(0.01209, 0.01, host=0.01457)
    chosen = pick({"torch._scaled_mm": scaled_mm, "triton": triton})
    assert chosen.best == chosen.fastest == "torch._scaled_mm"
    # as the reference it is kept, and as a challenger it wins, on the device's figures
    assert pick({"torch._scaled_mm": scaled_mm, "triton": triton}, "triton").best == "torch._scaled_mm"
    assert pick({"torch._scaled_mm": scaled_mm, "triton": triton}, "torch._scaled_mm").note == ""


def test_a_host_time_clearly_higher_still_loses() -> None:
    # 20 % more host time is more than the host's noise: the cheaper call wins although it is slower
    # on the device.
    chosen = pick({"a": result(0.009, 0.01, host=0.018), "b": result(0.012, 0.01, host=0.015)})
    assert chosen.best == "b"


def test_device_bound_costs_are_no_host_tie() -> None:
    # host times below the device times: the device's figures alone, 5 % apart, decide
    assert not host_tie(result(1.0, host=0.5), result(1.05, host=0.2))
    assert pick({"a": result(1.0, host=0.5), "b": result(1.05, host=0.2)}).best == "a"
