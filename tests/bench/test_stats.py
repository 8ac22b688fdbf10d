"""bench/stats.py: the median of the timings left once Tukey's fences have dropped the outliers."""

from __future__ import annotations

import json
import statistics

import pytest

from kernelpick.bench.stats import TimingSummary

STEADY = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.00, 1.01, 0.99]


def test_a_slow_outlier_is_dropped_and_does_not_move_the_mean() -> None:
    summary = TimingSummary.of([*STEADY, 25.0])
    assert summary.outliers == 1
    assert summary.runs == 11
    assert summary.max_ms == 1.03
    assert summary.mean_ms == pytest.approx(statistics.fmean(STEADY))
    assert summary.median_ms == pytest.approx(statistics.median(STEADY))


def test_a_fast_outlier_is_dropped_too() -> None:
    summary = TimingSummary.of([0.01, *STEADY])
    assert summary.outliers == 1
    assert summary.min_ms == 0.97


def test_samples_inside_the_fences_are_all_kept() -> None:
    summary = TimingSummary.of(STEADY)
    assert summary.outliers == 0
    assert summary.runs == len(STEADY)
    assert (summary.min_ms, summary.max_ms) == (0.97, 1.03)
    assert summary.median_ms == statistics.median(STEADY)
    q1, _, q3 = statistics.quantiles(sorted(STEADY), n=4)
    assert summary.iqr_ms == pytest.approx(q3 - q1)


def test_identical_samples_are_not_outliers_of_each_other() -> None:
    summary = TimingSummary.of([2.0] * 8)
    assert (summary.median_ms, summary.iqr_ms, summary.outliers) == (2.0, 0.0, 0)


def test_order_of_samples_does_not_matter() -> None:
    samples = [*STEADY, 25.0]
    assert TimingSummary.of(samples) == TimingSummary.of(list(reversed(samples)))


def test_one_sample() -> None:
    summary = TimingSummary.of([3.5])
    assert summary == TimingSummary(3.5, 3.5, 3.5, 3.5, 0.0, 1, 0)


def test_two_samples_give_their_mean_as_median() -> None:
    summary = TimingSummary.of([1.0, 3.0])
    assert (summary.median_ms, summary.min_ms, summary.max_ms, summary.runs) == (2.0, 1.0, 3.0, 2)


def test_three_samples_are_too_few_to_call_any_an_outlier() -> None:
    summary = TimingSummary.of([1.0, 2.0, 100.0])
    assert summary.outliers == 0
    assert summary.median_ms == 2.0
    assert summary.max_ms == 100.0


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="no timings"):
        TimingSummary.of([])


def test_dict_round_trip_through_json() -> None:
    summary = TimingSummary.of([*STEADY, 25.0])
    data = json.loads(json.dumps(summary.to_dict()))
    assert TimingSummary.from_dict(data) == summary


def test_from_dict_ignores_unknown_fields() -> None:
    data = {**TimingSummary.of([1.0]).to_dict(), "added_later": 1}
    assert TimingSummary.from_dict(data) == TimingSummary.of([1.0])


def test_a_call_costs_its_device_time_and_keeps_its_host_time_beside_it() -> None:
    timing = TimingSummary.of([1.0, 1.0, 1.0], timer="cudagraph")
    assert timing.timer == "cudagraph" and timing.host_ms is None and timing.cost_ms == 1.0
    assert timing.with_host(3.0).cost_ms == 1.0 and timing.with_host(3.0).host_ms == 3.0
    assert timing.with_host(0.5).cost_ms == 1.0


def test_spread_is_half_the_interquartile_range_over_the_median() -> None:
    timing = TimingSummary.of([0.9, 0.95, 1.0, 1.05, 1.1])
    assert timing.spread == pytest.approx(0.5 * timing.iqr_ms / timing.median_ms)


def test_timer_and_host_time_survive_the_store_and_rounds() -> None:
    timing = TimingSummary.of([1.0, 2.0, 3.0], timer="profiler").with_host(0.5)
    assert TimingSummary.from_dict(timing.to_dict()) == timing
    assert timing.scaled(2.0).host_ms == 0.5 and timing.scaled(2.0).timer == "profiler"
    combined = TimingSummary.combine([timing, timing.with_host(1.5)])
    assert combined.host_ms == 1.0 and combined.timer == "profiler"


def test_rows_stored_before_timers_were_named_still_load() -> None:
    old = {
        "median_ms": 1.0,
        "mean_ms": 1.0,
        "min_ms": 1.0,
        "max_ms": 1.0,
        "iqr_ms": 0.0,
        "runs": 3,
        "outliers": 0,
    }
    timing = TimingSummary.from_dict(old)
    assert timing.timer == "" and timing.host_ms is None
