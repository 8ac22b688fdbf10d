"""reports/search.py: the search traces kernelpick's searches log are read back for the progress plot."""

from __future__ import annotations

import math

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.reports.search import parse_search


def test_a_logged_search_trace_with_nested_results_gives_its_curve() -> None:
    ok = BenchmarkResult("ok", TimingSummary.of([2.0])).to_dict()
    faster = BenchmarkResult("ok", TimingSummary.of([1.5])).to_dict()
    failed = BenchmarkResult.failed("compile_error", "no").to_dict()
    trace = parse_search(
        {
            "strategy": "model",
            "evaluations": [
                {"config": {}, "result": ok, "seconds_at": 0.5, "effort": 1.0},
                {"config": {}, "result": failed, "seconds_at": 0.5, "effort": 1.0},
                {"config": {}, "result": faster, "seconds_at": 1.25, "effort": 1.0},
            ],
        }
    )
    assert trace is not None and trace.strategy == "model" and trace.timed
    assert trace.seconds == (0.5, 0.5, 1.25)
    assert trace.costs[0] == 2.0 and math.isinf(trace.costs[1]) and trace.costs[2] == 1.5
    assert trace.best_so_far() == [2.0, 2.0, 1.5]


def test_a_quick_timing_does_not_outrank_a_full_one_as_the_tuner_picks() -> None:
    quick = BenchmarkResult("ok", TimingSummary.of([0.5])).to_dict()
    full = BenchmarkResult("ok", TimingSummary.of([1.0])).to_dict()
    trace = parse_search(
        {
            "strategy": "halving",
            "evaluations": [
                {"config": {"x": 1}, "result": quick, "seconds_at": 0.5, "effort": 0.25},
                {"config": {"x": 1}, "result": full, "seconds_at": 1.0, "effort": 1.0},
            ],
        }
    )
    assert trace is not None
    assert trace.best_so_far() == [0.5, 1.0] and trace.best_ms == 1.0  # the full timing is what was picked
