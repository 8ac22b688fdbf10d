"""bench/result.py: a result has timings exactly when it is ok; failures carry their reason."""

from __future__ import annotations

import json
import math

import pytest

from kernelpick.bench.result import STATUSES, BenchmarkResult
from kernelpick.bench.stats import TimingSummary

TIMING = TimingSummary.of([1.0, 1.5, 2.0])


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
