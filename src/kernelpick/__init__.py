"""kernelpick: pick the fastest GPU kernel for each call, safely."""

from __future__ import annotations

from kernelpick import ops, settings
from kernelpick.analysis import KernelAccess, analyze
from kernelpick.bench import BenchmarkResult, TimingSummary
from kernelpick.errors import (
    AnalysisError,
    ConfigError,
    KernelpickError,
    MutatesArgsError,
    NoValidChoices,
    NoValidConfigs,
    OperatorError,
    SettingsError,
    StoreError,
)
from kernelpick.pytorch import Operator, functional, launch, op
from kernelpick.select import (
    Epilogue,
    SelectionRecord,
    Selector,
    TritonTemplate,
    extern,
    template,
    triton_choice,
)
from kernelpick.tune import Autotuner, Config, TuningRecord, autotune

__version__ = "0.1.0"

__all__ = [
    "AnalysisError",
    "Autotuner",
    "BenchmarkResult",
    "Config",
    "ConfigError",
    "Epilogue",
    "KernelAccess",
    "KernelpickError",
    "MutatesArgsError",
    "NoValidChoices",
    "NoValidConfigs",
    "Operator",
    "OperatorError",
    "SelectionRecord",
    "Selector",
    "SettingsError",
    "StoreError",
    "TimingSummary",
    "TritonTemplate",
    "TuningRecord",
    "__version__",
    "analyze",
    "autotune",
    "extern",
    "functional",
    "launch",
    "op",
    "ops",
    "settings",
    "template",
    "triton_choice",
]
