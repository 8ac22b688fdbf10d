"""Benchmarking: timers, statistics and typed results."""

from __future__ import annotations

from kernelpick.bench.result import STATUSES, BenchmarkResult, Status, TimingSummary
from kernelpick.bench.timers import Benchmarkable, Timer, TimingBudget

__all__ = [
    "STATUSES",
    "BenchmarkResult",
    "Benchmarkable",
    "Status",
    "Timer",
    "TimingBudget",
    "TimingSummary",
]
