"""Makefile: `make demo` says what it is doing before each step of its install (the large downloads
show pip's progress) and installs kernelpick alone; `make test` adds the test tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def planned(target: str) -> list[str]:
    """The commands `make TARGET` would run from scratch (make -n: none is run). Under `make test`
    the inner make would also print the directory it enters and leaves: --no-print-directory."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_demo_says_each_step_and_shows_the_downloads_progress() -> None:
    lines = planned("demo")
    installs = [i for i, line in enumerate(lines) if "pip install" in line and "--upgrade pip" not in line]
    assert len(installs) == 2  # torch, then kernelpick: not its test tools
    for index in installs:
        said = [line for line in lines[:index] if line.startswith('echo "make:')]
        assert said and ("torch" in said[-1] or "kernelpick" in said[-1])  # the step is named first
        assert " -q " not in lines[index] and "--progress-bar on" in lines[index]
    assert not any("[dev]" in line for line in lines)
    assert lines[-1].endswith("kernelpick demo")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_test_installs_the_test_tools_too() -> None:
    lines = planned("test")
    assert any("-e '.[dev]'" in line for line in lines)
