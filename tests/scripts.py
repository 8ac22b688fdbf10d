"""A test's own Python script run in a fresh process, with a kernelpick cache folder of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_script(folder: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `source`, written to `folder`, with `args`; its cache folder in `folder` too (the same on
    every run of one test: a second run finds what the first stored)."""
    script = folder / "script.py"
    script.write_text(source)
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(folder / "cache")}
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=300
    )
