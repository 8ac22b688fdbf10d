"""Benchmarking: timers, statistics, device facts and typed results."""

from __future__ import annotations

from kernelpick.bench.device import DeviceInfo
from kernelpick.bench.result import STATUSES, BenchmarkResult, Status
from kernelpick.bench.stats import TimingSummary
from kernelpick.bench.timers import Benchmarkable, Timer, TimingBudget

__all__ = [
    "STATUSES",
    "BenchmarkResult",
    "Benchmarkable",
    "DeviceInfo",
    "Status",
    "Timer",
    "TimingBudget",
    "TimingSummary",
]
