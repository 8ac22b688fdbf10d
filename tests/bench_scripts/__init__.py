"""Tests of the GPU benchmark scripts' bookkeeping, each run on the CPU in its dry mode."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(script: str) -> ModuleType:
    """bench/`script` imported as a module of its own name (its functions tested directly)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, BENCH / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_bench(script: str, *args: str, timeout: float = 280, env: dict[str, str] | None = None) -> None:
    """Run bench/`script` with `args` in a fresh Python (this one's import path, this environment
    and `env`); fail with its error output unless it succeeds."""
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        env={**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
