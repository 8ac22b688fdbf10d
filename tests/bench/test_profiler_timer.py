"""bench/profiler_timer.py: a run's time is the device activity between its two markers."""

from __future__ import annotations

import pytest

from kernelpick.bench.profiler_timer import run_spans

MARK = "spin_kernel(long)"


def test_each_run_sums_its_kernels_copies_and_memsets_and_nothing_between_runs() -> None:
    activities = [
        ("copy_kernel (setup)", 0, 5_000),
        ("fill_kernel<signed char> (flush)", 10_000, 30_000),
        (MARK, 41_000, 1_000),
        ("gemm_kernel", 43_000, 20_000),
        ("Memset (Device)", 64_000, 1_000),
        (MARK, 66_000, 1_000),
        ("fill_kernel<signed char> (flush)", 70_000, 30_000),
        (MARK, 101_000, 1_000),
        ("gemm_kernel", 103_000, 22_000),
        (MARK, 126_000, 1_000),
    ]
    assert run_spans(activities) == pytest.approx([0.021, 0.022])


def test_activities_are_taken_in_time_order() -> None:
    activities = [(MARK, 30, 1), ("k", 10, 5), (MARK, 0, 1), ("k", 50, 7), (MARK, 40, 1), (MARK, 60, 1)]
    assert run_spans(activities) == pytest.approx([5e-6, 7e-6])


def test_a_run_that_never_closed_is_not_counted() -> None:
    assert run_spans([(MARK, 0, 1), ("k", 2, 5)]) == []
