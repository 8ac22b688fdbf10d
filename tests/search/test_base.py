"""search/base.py: batches and budgets refuse what cannot work; budgets follow the settings;
the best of a history is the fastest of its fullest timings."""

from __future__ import annotations

import pytest

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search import Batch, Budget, Evaluation
from kernelpick.search.base import best, latest

A, B = Config({"BLOCK": 16}), Config({"BLOCK": 32})


def _timed(config: Config, ms: float, effort: float = 1.0) -> Evaluation:
    return Evaluation(config, BenchmarkResult("ok", TimingSummary.of([ms])), 0.0, effort)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Batch(()), "at least one config; a strategy that is done returns None"),
        (lambda: Batch((A,), effort=0.0), r"effort must be in \(0, 1\], got 0.0"),
        (lambda: Batch((A,), effort=1.5), r"effort must be in \(0, 1\], got 1.5"),
        (lambda: Budget(max_evaluations=0), "max_evaluations must be at least 1"),
        (lambda: Budget(max_seconds=-1.0), "max_seconds must be positive"),
    ],
)
def test_batches_and_budgets_that_cannot_work_are_refused(make: object, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("budget", "seconds", "expected"),
    [
        (0, 0, Budget(None, None)),
        (0.1, 0, Budget(150, None)),
        (0.0001, 0, Budget(1, None)),
        (40, 12.5, Budget(40, 12.5)),
    ],
)
def test_the_budget_follows_kernelpick_search_budget_and_seconds(
    budget: float, seconds: float, expected: Budget
) -> None:
    with settings.override(search_budget=budget, search_seconds=seconds):
        assert Budget.from_settings(space_size=1500) == expected


def test_the_best_is_the_fastest_of_the_fullest_timings_and_failures_never_are() -> None:
    failed = Evaluation(A, BenchmarkResult.failed("compile_error", "no"), 0.0)
    assert best([failed]) is None
    quick_a, full_b = _timed(A, 1.0, effort=0.25), _timed(B, 3.0)
    assert best([quick_a, full_b, failed]) == full_b
    assert best([quick_a]) == quick_a
    full_a = _timed(A, 2.0)
    assert latest([quick_a, full_a, full_b, _timed(A, 1.0, effort=0.5)]) == {A: full_a, B: full_b}
