"""Sample keys and results for the store tests, a way to damage a SQLite store's file, and one to make
files read-only."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.store.base import CandidateResult
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.sqlite import SQLiteStore

TOOLCHAIN = Toolchain("3.9.0", "2.13.0", None)


def make_key(kernel: str = "mm", *inputs: object) -> TuningKey:
    return TuningKey(kernel, "source-hash", "cpu", "", TOOLCHAIN, inputs or (1024,))


def ok(median_ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([median_ms]))


def measured(candidate: str, median_ms: float) -> CandidateResult:
    """A result of candidate `candidate` (its digest: any string works for a store)."""
    return CandidateResult(candidate, {"kwargs": {"BLOCK": 64}, "name": candidate}, ok(median_ms))


def write_damaged_store(path: Path, *, picks: bool = False) -> None:
    """A store of 2,000 results (100 keys of 20 candidates) at `path` with four pages in the middle of
    its file overwritten. With `picks`, c0 is picked for each key after all are saved (so that the
    picks' pages follow the results' at the end of the file, away from the damage)."""
    store = SQLiteStore(path)
    for index in range(100):
        store.save(make_key("mm", index), [measured(f"c{c}", 1.0 + c) for c in range(20)])
    for index in range(100 if picks else 0):
        store.save(make_key("mm", index), [], pick="c0")
    store.close()  # the last connection to close checkpoints the log into the file and removes it
    assert not Path(f"{path}-wal").exists()
    size, page = path.stat().st_size, 4096
    with open(path, "r+b") as file:
        file.seek((size // 2) // page * page)
        file.write(b"garbage!" * (4 * page // 8))  # 'g' is no page type: quick_check cannot miss it


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Within the block, `paths` (files and folders) cannot be written, even by root: as root they are
    made immutable (`chattr +i`, root ignores permissions), else their write permissions are taken."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: a read-only file cannot be made")
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not allowed here: {done.stderr.strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
        return
    modes = {path: path.stat().st_mode for path in paths}
    for path in paths:
        path.chmod(modes[path] & ~0o222)
    try:
        yield
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
