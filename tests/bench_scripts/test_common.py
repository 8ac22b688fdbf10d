"""Tests of bench/common.py's bookkeeping: which commit a result file names."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import load_bench


def load_common() -> ModuleType:
    return load_bench("common.py")


def git(folder: Path, *arguments: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *arguments], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_tree_that_differs_from_its_head_is_not_named_as_that_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = load_common()
    git(tmp_path, "init", "-q")
    (tmp_path / "measured.py").write_text("A = 1\n")
    git(tmp_path, "add", "measured.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    head = git(tmp_path, "rev-parse", "--short", "HEAD")
    monkeypatch.setattr(common, "ROOT", tmp_path)
    monkeypatch.delenv("BENCH_COMMIT", raising=False)
    (tmp_path / "notes.txt").write_text("untracked files are not the code measured\n")
    assert common.commit() == head
    (tmp_path / "measured.py").write_text("A = 2\n")  # as the device's copy: newer files over an older .git
    assert common.commit() == f"{head}+changes"
    monkeypatch.setenv("BENCH_COMMIT", "abc1234")  # the caller knows better
    assert common.commit() == "abc1234"
    monkeypatch.setattr(common, "ROOT", tmp_path / "not-a-repository")
    monkeypatch.delenv("BENCH_COMMIT")
    assert common.commit() is None
