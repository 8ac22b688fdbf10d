"""store/base.py: the in-memory store keeps one result per (key, candidate), like the persistent ones;
stored results are checked as they are read."""

from __future__ import annotations

import re

import pytest

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.store.base import (
    CandidateResult,
    MemoryStore,
    load_candidates,
    parse_description,
    parse_result,
)
from kernelpick.store.keys import MAX_NESTING, Toolchain, TuningKey


def key(*inputs: object) -> TuningKey:
    return TuningKey("mm", "source-hash", "cpu", "", Toolchain("3.9.0", "2.13.0", None), inputs)


def result(median_ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([median_ms]))


def test_memory_store_replaces_per_candidate_and_isolates_keys() -> None:
    store = MemoryStore()
    store.save(key(1), [CandidateResult("a", {}, result(2.0)), CandidateResult("b", {}, result(3.0))])
    store.save(key(1), [CandidateResult("a", {}, result(1.0))])
    loaded = store.load(key(1))
    assert {digest: r.result.median_ms for digest, r in loaded.items()} == {"a": 1.0, "b": 3.0}
    assert store.load(key(2)) == {}
    loaded.clear()  # what load returns is the caller's to change
    assert len(store.load(key(1))) == 2


def test_a_stored_result_keeps_its_compile_seconds_and_refuses_any_that_are_no_number() -> None:
    data = {"status": "compile_error", "timing": None, "message": "bad block", "compile_s": 3.5}
    assert parse_result(data).compile_s == 3.5
    assert parse_result({**data, "compile_s": None}).compile_s is None
    with pytest.raises(ValueError, match="result's compile_s is 'slow', not a number"):
        parse_result({**data, "compile_s": "slow"})


TIMING = TimingSummary.of([1.0, 1.1, 1.2]).to_dict()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"status": "ok", "timing": {**TIMING, "median_ms": -1.0}},
            "timing.median_ms is -1.0, not a finite time",
        ),
        (
            {"status": "ok", "timing": {**TIMING, "median_ms": 0.0, "min_ms": 0.0}},
            "median_ms is 0.0, not a time > 0",
        ),
        ({"status": "ok", "timing": {**TIMING, "median_ms": float("inf")}}, "median_ms is inf, not a finite"),
        (
            {"status": "ok", "timing": {**TIMING, "median_ms": float("nan")}},
            "median_ms is 'nan', not a number",
        ),
        (
            {"status": "ok", "timing": {**TIMING, "median_ms": 1e-6}},
            "is not between its min_ms 1.0 and max_ms",
        ),
        ({"status": "ok", "timing": {**TIMING, "runs": 0}}, "has 0 runs"),
        ({"status": "ok", "timing": {**TIMING, "outliers": 9}}, "3 runs and 9 outliers"),
        ({"status": "ok", "timing": {**TIMING, "host_ms": -0.5}}, "host_ms is -0.5"),
        (
            {"status": "ok", "timing": TIMING, "message": "CompilationError"},
            "status is 'ok' with a failure's message",
        ),
        ({"status": "ok", "timing": None}, "timings exactly when its status is 'ok'"),
        (
            {"status": "compile_error", "timing": TIMING, "message": "no"},
            "timings exactly when its status is 'ok'",
        ),
        ({"status": "skipped", "timing": None, "message": "slow"}, "'skipped', which is never stored"),
        (
            {"status": "crashed", "timing": None, "compile_s": -3.0},
            "compile_s is '-3.0', not a number of seconds",
        ),
    ],
)
def test_a_stored_result_out_of_range_or_inconsistent_is_refused(
    data: dict[str, object], problem: str
) -> None:
    # A forged row must not reach a pick: a zero or negative time would win every comparison.
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_result(data)


def test_a_description_nested_deeper_than_kernelpick_writes_is_refused() -> None:
    deep: object = 1
    for _ in range(MAX_NESTING + 1):
        deep = [deep]
    with pytest.raises(ValueError, match=f"nested over {MAX_NESTING} deep"):
        parse_description({"name": "a", "config": deep})
    assert parse_description({"name": "a", "config": [[[1]]]}) == {"name": "a", "config": [[[1]]]}


def test_load_candidates_gives_only_the_callers_own_from_any_store() -> None:
    store = MemoryStore()  # a store without the method: what it loads is filtered
    store.save(
        key(1), [CandidateResult("mine", {}, result(2.0)), CandidateResult("planted", {}, result(0.1))]
    )
    assert set(load_candidates(store, key(1), ["mine", "other"])) == {"mine"}
