"""Autotuning Triton kernels: the drop-in `autotune` decorator, configs and tuning records."""

from __future__ import annotations

from kernelpick.config import Config
from kernelpick.engine.record import TuningRecord
from kernelpick.tune.autotuner import Autotuner, autotune

__all__ = ["Autotuner", "Config", "TuningRecord", "autotune"]
