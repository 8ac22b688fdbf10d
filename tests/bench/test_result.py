"""bench/result.py: a result has timings exactly when it is ok; failures carry their reason; its timings
are the median of those left once Tukey's fences have dropped the outliers."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from kernelpick.bench.result import STATUSES, BenchmarkResult, TimingSummary

TIMING = TimingSummary.of([1.0, 1.5, 2.0])
STEADY = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.00, 1.01, 0.99]


def test_ok_result_has_its_median() -> None:
    result = BenchmarkResult("ok", TIMING)
    assert result.ok
    assert result.median_ms == 1.5


def test_ok_without_timing_is_rejected() -> None:
    with pytest.raises(ValueError, match="exactly when its status is 'ok'"):
        BenchmarkResult("ok")


@pytest.mark.parametrize("status", [s for s in STATUSES if s != "ok"])
def test_failure_with_timing_is_rejected(status: str) -> None:
    with pytest.raises(ValueError, match="exactly when its status is 'ok'"):
        BenchmarkResult(status, TIMING)  # type: ignore[arg-type]


def test_unknown_status_is_rejected_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown status 'slow'.*'compile_error'"):
        BenchmarkResult("slow")  # type: ignore[arg-type]


def test_failures_sort_after_every_timing() -> None:
    failed = BenchmarkResult.failed("compile_error", "bad block")
    assert not failed.ok
    assert failed.median_ms == math.inf
    assert failed.message == "bad block"
    assert sorted([failed, BenchmarkResult("ok", TIMING)], key=lambda r: r.median_ms)[0].ok


@pytest.mark.parametrize(
    "result",
    [
        BenchmarkResult("ok", TIMING),
        BenchmarkResult("ok", TIMING, compile_s=2.5),
        BenchmarkResult.failed("timeout", "no answer in 10 s", compile_s=10.0),
    ],
)
def test_dict_round_trip_through_json(result: BenchmarkResult) -> None:
    data = json.loads(json.dumps(result.to_dict()))
    assert BenchmarkResult.from_dict(data) == result
    stored = BenchmarkResult.from_dict(data, from_store=True)
    assert stored.from_store
    assert (stored.status, stored.timing, stored.message) == (result.status, result.timing, result.message)


def test_from_store_is_not_written_to_plain_data() -> None:
    assert "from_store" not in BenchmarkResult("ok", TIMING, from_store=True).to_dict()


def test_compile_seconds_are_written_only_where_known() -> None:
    assert "compile_s" not in BenchmarkResult("ok", TIMING).to_dict()
    assert BenchmarkResult("ok", TIMING, compile_s=1.25).to_dict()["compile_s"] == 1.25


def test_from_dict_without_a_message() -> None:
    assert BenchmarkResult.from_dict({"status": "crashed", "timing": None}).message == ""


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


def test_a_timing_summary_round_trips_through_json() -> None:
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
