"""kernelpick: pick the fastest GPU kernel for each call, safely."""

from __future__ import annotations

from kernelpick import settings
from kernelpick.errors import (
    AnalysisError,
    ConfigError,
    KernelpickError,
    NoValidConfigs,
    SettingsError,
    StoreError,
)

__version__ = "0.1.0"

__all__ = [
    "AnalysisError",
    "ConfigError",
    "KernelpickError",
    "NoValidConfigs",
    "SettingsError",
    "StoreError",
    "__version__",
    "settings",
]
