"""kernelpick: pick the fastest GPU kernel for each call, safely."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kernelpick import reports, settings
from kernelpick.analysis import KernelAccess, analyze
from kernelpick.bench import BenchmarkResult, TimingSummary
from kernelpick.device import Requirements
from kernelpick.engine.eligibility import require
from kernelpick.errors import (
    AnalysisError,
    ArgumentError,
    CacheDirError,
    ConfigError,
    InterpretationError,
    KernelpickError,
    MutatesArgsError,
    NoValidChoices,
    NoValidConfigs,
    OperatorError,
    OperatorNotRegistered,
    SettingsError,
    StoreError,
    TableError,
    TuningInCapture,
    TuningRequired,
)
from kernelpick.search.space import Space
from kernelpick.select import (
    Epilogue,
    SelectionRecord,
    Selector,
    TritonTemplate,
    extern,
    processed,
    template,
    triton_choice,
)
from kernelpick.select.background import wait as wait_for_tuning
from kernelpick.store.default import fresh_cache
from kernelpick.store.deploy import load_table
from kernelpick.tune import Autotuner, Config, TuningRecord, autotune
from kernelpick.version import __version__
from kernelpick.workers import start_workers

if TYPE_CHECKING:
    from kernelpick import ops
    from kernelpick.pytorch import Operator, op
    from kernelpick.pytorch.functional import functional, launch

# Imported on first use: the PyTorch integration imports torch._dynamo, and the GEMM ops render
# templates, which together double the time `import kernelpick` takes (worker processes import it too).
_LAZY = {
    "Operator": "kernelpick.pytorch",
    "functional": "kernelpick.pytorch",
    "launch": "kernelpick.pytorch",
    "op": "kernelpick.pytorch",
    "ops": None,
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'kernelpick' has no attribute {name!r}")
    module = _LAZY[name]
    value = (
        importlib.import_module(f"kernelpick.{name}")
        if module is None
        else getattr(importlib.import_module(module), name)
    )
    globals()[name] = value
    return value


__all__ = [
    "AnalysisError",
    "ArgumentError",
    "Autotuner",
    "BenchmarkResult",
    "CacheDirError",
    "Config",
    "ConfigError",
    "Epilogue",
    "InterpretationError",
    "KernelAccess",
    "KernelpickError",
    "MutatesArgsError",
    "NoValidChoices",
    "NoValidConfigs",
    "Operator",
    "OperatorError",
    "OperatorNotRegistered",
    "Requirements",
    "SelectionRecord",
    "Selector",
    "SettingsError",
    "Space",
    "StoreError",
    "TableError",
    "TimingSummary",
    "TritonTemplate",
    "TuningInCapture",
    "TuningRecord",
    "TuningRequired",
    "__version__",
    "analyze",
    "autotune",
    "extern",
    "fresh_cache",
    "functional",
    "launch",
    "load_table",
    "op",
    "ops",
    "processed",
    "reports",
    "require",
    "settings",
    "start_workers",
    "template",
    "triton_choice",
    "wait_for_tuning",
]
