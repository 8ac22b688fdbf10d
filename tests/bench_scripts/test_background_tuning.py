"""bench/background_tuning.py: its schedule, modes and results file, kept on the CPU with --dry."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import load_bench, run_bench


def bench_module() -> ModuleType:
    return load_bench("background_tuning.py")


def test_sizes_appear_one_after_another_and_each_step_runs_one_seen_so_far() -> None:
    plan = bench_module().schedule([1, 2, 4], every=3, steps=10)
    assert plan[0] == 1 and plan[3] == 2 and plan[6] == 4  # each new size at its first step
    assert all(m in (1, 2, 4)[: i // 3 + 1] for i, m in enumerate(plan))


def test_the_steps_after_the_schedule_are_kept_as_a_summary() -> None:
    summary = bench_module().step_summary([float(ms) for ms in range(1, 201)])
    assert summary == {"steps": 200, "median_ms": 100.5, "p99_ms": 199.0, "max_ms": 200.0}
    assert bench_module().step_summary([]) == {"steps": 0}


@pytest.mark.slow
def test_a_dry_run_times_every_mode_and_background_ends_with_every_pick_final(tmp_path: Path) -> None:
    run_bench("background_tuning.py", "--dry", "--out", str(tmp_path), timeout=600)
    data = json.loads((tmp_path / "background_tuning-dry.json").read_text())
    runs = data["runs"]
    assert set(runs) == {"blocking", "background", "stored"} and data["settings"]["dry"]
    for run in runs.values():
        assert run["keys"] >= 3 and run["provisional_left"] == 0 and run["all_final_s"] is not None
        assert len(run["steps_ms"]) == 10 and run["plan"] == bench_module().schedule([1, 2, 4], 3, 10)
        assert len(run["pick_of"]) == run["keys"] and run["after_schedule"]["steps"] >= 0
    assert runs["stored"]["tuning_process_s"] > 0 and runs["blocking"]["tuning_process_s"] is None
    summary = data["summary"]
    assert summary["first_forward_background_over_stored"] > 0 and summary["all_final_s"] is not None
    # A size's first forward waits for its tuning only when blocking.
    assert runs["background"]["first_forward_s"] < runs["blocking"]["first_forward_s"]
