"""kernelpick: pick the fastest GPU kernel for each call, safely."""

from __future__ import annotations

from kernelpick import settings
from kernelpick.bench import BenchmarkResult, TimingSummary
from kernelpick.errors import (
    AnalysisError,
    ConfigError,
    KernelpickError,
    MutatesArgsError,
    NoValidConfigs,
    OperatorError,
    SettingsError,
    StoreError,
)
from kernelpick.pytorch import Operator, functional, launch, op
from kernelpick.tune import Autotuner, Config, TuningRecord, autotune

__version__ = "0.1.0"

__all__ = [
    "AnalysisError",
    "Autotuner",
    "BenchmarkResult",
    "Config",
    "ConfigError",
    "KernelpickError",
    "MutatesArgsError",
    "NoValidConfigs",
    "Operator",
    "OperatorError",
    "SettingsError",
    "StoreError",
    "TimingSummary",
    "TuningRecord",
    "__version__",
    "autotune",
    "functional",
    "launch",
    "op",
    "settings",
]
