"""kernelpick: pick the fastest GPU kernel for each call, safely."""

from __future__ import annotations

from kernelpick import settings
from kernelpick.analysis import KernelAccess, analyze
from kernelpick.bench import BenchmarkResult, TimingSummary
from kernelpick.errors import (
    AnalysisError,
    ConfigError,
    KernelpickError,
    NoValidConfigs,
    SettingsError,
    StoreError,
)
from kernelpick.tune import Autotuner, Config, TuningRecord, autotune

__version__ = "0.1.0"

__all__ = [
    "AnalysisError",
    "Autotuner",
    "BenchmarkResult",
    "Config",
    "ConfigError",
    "KernelAccess",
    "KernelpickError",
    "NoValidConfigs",
    "SettingsError",
    "StoreError",
    "TimingSummary",
    "TuningRecord",
    "__version__",
    "analyze",
    "autotune",
    "settings",
]
