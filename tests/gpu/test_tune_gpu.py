"""`kernelpick tune` on a GPU: one process per listed GPU (--devices), and a table the tuned kernels run from."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpick.cli import tune as command
from kernelpick.jobs.cluster import tune_spec
from kernelpick.store.deploy import tables

SPEC = Path(__file__).resolve().parents[1] / "jobs" / "specs" / "small_spec.py"

pytestmark = pytest.mark.gpu


def test_jobs_run_in_one_process_per_listed_gpu_and_export_a_table(tmp_path: Path) -> None:
    run = tune_spec(SPEC, devices=["0"])
    assert all(o.ok for o in run.outcomes), [o.error for o in run.outcomes]
    assert len(run.outcomes) == 5 and run.device.startswith("NVIDIA")
    assert all(o.rows or o.kernels for o in run.outcomes)
    table = command.export(run, tmp_path / "table.json")
    assert len(table.entries) == 5 and table.device == run.device
    tables().clear()
