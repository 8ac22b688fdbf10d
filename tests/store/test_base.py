"""store/base.py: the in-memory store keeps one result per (key, candidate), like the persistent ones;
stored results are checked as they are read."""

from __future__ import annotations

import pytest

from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.stats import TimingSummary
from kernelpick.store.base import MemoryStore, StoredResult, parse_result
from kernelpick.store.keys import Toolchain, TuningKey


def key(*inputs: object) -> TuningKey:
    return TuningKey("mm", "source-hash", "cpu", "", Toolchain("3.9.0", "2.13.0", None), inputs)


def result(median_ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([median_ms]))


def test_memory_store_replaces_per_candidate_and_isolates_keys() -> None:
    store = MemoryStore()
    store.save(key(1), [StoredResult("a", {}, result(2.0)), StoredResult("b", {}, result(3.0))])
    store.save(key(1), [StoredResult("a", {}, result(1.0))])
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
