"""tune/first_launch.py: a stored pick that cannot run is dropped on its first launch and its key tuned
again, instead of making every call of the kernel raise (issue 40: a forged `ok` row in a store)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import triton

import kernelpick
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.store.base import CandidateResult
from kernelpick.store.sqlite import SQLiteStore
from kernelpick.tune.first_launch import FirstLaunch
from tests.tune.kernels import add_kernel, grid_1d

GOOD, BAD = triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 48})  # arange of 48: no compile
N = 100


def tuned(store: SQLiteStore) -> kernelpick.Autotuner:
    """A new tuned kernel on `store`, as a new process would have, called once."""
    kernel = kernelpick.autotune([GOOD, BAD], key=["n"], store=store)(add_kernel)
    x = torch.arange(N, dtype=torch.float32)
    out = torch.empty(N)
    kernel[grid_1d(N)](x, x, out, N)
    torch.testing.assert_close(out, x + x)
    return kernel


def test_a_forged_ok_pick_that_does_not_compile_is_dropped_and_its_key_measured_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "results.sqlite3")
    tuned(store)  # measured: BLOCK=48 failed to compile
    [bad] = [r for r in store.rows() if r.result.status != "ok"]
    # Planted as another writer of a store without a signing key could: in range, ok, the fastest, picked.
    forged = BenchmarkResult("ok", TimingSummary.of([1e-3], timer="wallclock"))
    store.save(bad.key, [CandidateResult(bad.candidate, bad.description, forged)], pick=bad.candidate)

    with caplog.at_level(logging.WARNING, logger="kernelpick.tune"):
        kernel = tuned(store)  # raised InterpretationError: "arange's range must be a power of 2"
    assert (
        "the pick BLOCK=48" in caplog.text and "power of 2" in caplog.text and "marked failed" in caplog.text
    )
    assert kernel.best_config.kwargs == {"BLOCK": 16}
    assert not kernel.last_tuning.from_store  # measured again, the store unread
    statuses = {r.description["kwargs"]["BLOCK"]: (r.result.status, r.picked) for r in store.rows()}
    assert statuses == {16: ("ok", True), 48: ("compile_error", False)}  # the forged row replaced

    again = tuned(store)  # the next process: the store's pick, checked once, then the plain entry
    assert again.last_tuning.from_store and again.best_config.kwargs == {"BLOCK": 16}
    entries = [*again._dispatch.entries.values(), *again._dispatch.fast.values()]
    assert entries and not any(isinstance(run, FirstLaunch) for _, run, _ in entries)
