"""Every example in examples/ runs as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(example: Path, tmp_path: Path) -> None:
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path)}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
