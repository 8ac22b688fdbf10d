"""select/tuning.py: the steps every tuning takes, once for tuned kernels and selectors alike."""

from __future__ import annotations

import pytest
import torch

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.stats import TimingSummary
from kernelpick.device import describe
from kernelpick.errors import TuningRequired
from kernelpick.select.tuning import Tuning, pick_with_incumbent
from kernelpick.store import MemoryStore, StoredResult, TuningKey


def timed(ms: float, spread: float = 0.0, *, stored: bool = False) -> BenchmarkResult:
    summary = TimingSummary(ms, ms, ms * (1 - spread), ms * (1 + spread), 2 * spread * ms, 50, 0, "events")
    return BenchmarkResult("ok", summary, from_store=stored)


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def load(self, key: TuningKey) -> dict[str, StoredResult]:
        self.loads += 1
        return super().load(key)


def tuning(store: MemoryStore | None) -> Tuning:
    key = TuningKey.make("add", "source", describe(torch.device("cpu")), [16])
    return Tuning("kernel `add`", "(n=16)", key, store, "cpu")


def test_the_store_is_read_once_and_what_it_holds_is_not_measured_again() -> None:
    store = CountingStore()
    first = tuning(store)
    first.save([StoredResult("a", {"name": "a"}, timed(1.0))], winner="a")
    second = tuning(store)
    results, todo = second.split(["a", "b"])
    assert list(results) == ["a"] and todo == ["b"]
    second.split(["a", "b"])
    assert store.loads == 1 and "store_read" in second.phases


def test_with_no_tuning_what_is_left_to_measure_is_an_error_naming_it() -> None:
    with (
        settings.override(no_tuning=True),
        pytest.raises(TuningRequired, match=r"kernel `add` has no winner for \(n=16\)"),
    ):
        tuning(MemoryStore()).split(["a", "b"])


def test_a_given_up_compile_is_not_stored() -> None:
    store = MemoryStore()
    step = tuning(store)
    step.save(
        [StoredResult("a", {}, timed(1.0)), StoredResult("b", {}, BenchmarkResult.failed("skipped", "slow"))],
        winner="a",
    )
    assert set(tuning(store).split(["a", "b"])[0]) == {"a"}


def test_the_stored_winner_stays_unless_a_new_candidate_clearly_beats_it() -> None:
    # A noisy first look at a new candidate does not displace the winner that earlier tunings kept.
    results = {"old": timed(1.00, 0.05, stored=True), "new": timed(0.99, 0.05)}
    chosen = pick_with_incumbent(results, None)
    assert chosen.best == "old" and "kept the reference old" in chosen.note
    assert (
        pick_with_incumbent({"old": timed(1.0, 0.01, stored=True), "new": timed(0.5, 0.01)}, None).best
        == "new"
    )
    # A reference the caller names (a selector's extern, a kernel's default=) comes first.
    assert pick_with_incumbent(results, "new").best == "new"
    # All new, or all stored: the fastest.
    assert pick_with_incumbent({"a": timed(1.0, 0.05), "b": timed(0.99, 0.05)}, None).best == "b"
