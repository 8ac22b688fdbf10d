"""bench/stability.py: every problem, the decode and fp8 ones included, tuned in each trial and its
picks timed, kept on the CPU with --tiny."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import run_bench


@pytest.mark.slow
def test_a_tiny_run_tunes_every_problem_in_every_trial_and_times_each_pick(tmp_path: Path) -> None:
    run_bench("stability.py", "--tiny", "--trials", "2", "--out", str(tmp_path))
    data = json.loads((tmp_path / "stability-cpu.json").read_text())
    names = ["autotune_64", "mm_16x64x32", "mm_32x64x64", "mm_1x32x64", "scaled_mm_16x32x64"]
    assert data["problems"] == names and data["settings"]["fp8_shapes"] == [[16, 32, 64]]
    assert [t["index"] for t in data["trials"]] == [0, 1]
    for trial in data["trials"]:
        assert list(trial["problems"]) == names
        assert all(p["pick"] and p["tuning_s"] > 0 for p in trial["problems"].values())
    fp8 = data["trials"][0]["problems"]["scaled_mm_16x32x64"]
    assert fp8["kind"] == "scaled_mm" and fp8["shape"] == [16, 32, 64]
    for name in names:
        timed = data["truth"]["problems"][name]
        picks = {t["problems"][name]["pick"] for t in data["trials"]}
        assert set(timed["median_ms"]) == picks and not timed["errors"]
        assert data["summary"][name]["trials"] == 2
