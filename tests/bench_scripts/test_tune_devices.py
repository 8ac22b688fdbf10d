"""bench/tune_devices.py's timeline: the spec's notes of each process, from the command's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench_scripts import BENCH


def tune_devices_timeline() -> Any:
    """bench/tune_devices.py's `timeline`, imported as the script's folder imports it."""
    sys.path.insert(0, str(BENCH))
    try:
        from tune_devices import timeline
    finally:
        sys.path.remove(str(BENCH))
    return timeline


def test_each_process_is_placed_on_the_commands_clock(tmp_path: Path) -> None:
    timeline = tune_devices_timeline()
    notes = tmp_path / "timeline.jsonl"
    events = [
        (1, "spec imported", 101.0, None),  # the command's own process: it deals the jobs
        (2, "spec imported", 104.0, None),
        (2, "job started", 105.0, "a"),
        (2, "job ended", 107.5, "a"),
        (2, "job started", 107.6, "b"),
        (2, "job ended", 109.0, "b"),
    ]
    created = {1: 100.2, 2: 102.0}
    notes.write_text(
        "".join(
            json.dumps(
                {"pid": pid, "event": event, "time": time, "created": created[pid]}
                | ({"job": job} if job else {})
            )
            + "\n"
            for pid, event, time, job in events
        )
    )
    processes = timeline(notes, {}, started_at=100.0)  # no tunings logged
    assert processes["1"] == pytest.approx(
        {
            "created": 0.2,
            "spec_imported": 1.0,
            "first_job_started": None,
            "first_tuning_began": None,
            "last_job_ended": None,
        }
    )
    assert processes["2"] == pytest.approx(
        {
            "created": 2.0,
            "spec_imported": 4.0,
            "first_job_started": 5.0,
            "first_tuning_began": None,
            "last_job_ended": 9.0,
        }
    )


def test_the_spec_notes_its_import_and_each_job_where_told(tmp_path: Path) -> None:
    notes = tmp_path / "timeline.jsonl"
    script = "import torch, tune_cluster_spec as spec\nspec.JOBS[-1].run(torch.device('cpu'))\n"
    subprocess.run(
        [sys.executable, "-c", script],
        cwd=BENCH,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": ":".join([str(BENCH), *sys.path]),
            "TUNE_DEVICES_TIMELINE": str(notes),
            "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"),
        },
        check=True,
        capture_output=True,
        timeout=240,
    )
    events = [json.loads(line) for line in notes.read_text().splitlines()]
    assert [e["event"] for e in events] == ["spec imported", "job started", "job ended"]
    assert events[1]["job"] == "demo add 4096"
    assert events[0]["created"] is None or events[0]["created"] <= events[0]["time"]


def test_a_process_first_tuning_is_when_its_earliest_tuning_began(tmp_path: Path) -> None:
    timeline = tune_devices_timeline()
    notes = tmp_path / "timeline.jsonl"
    notes.write_text(json.dumps({"pid": 2, "event": "spec imported", "time": 104.0, "created": 102.0}) + "\n")
    # The tuning log's entries (bench/tune_devices.tunings): each ends at `time`, `seconds` long.
    by_process = {"2": [{"time": 106.0, "seconds": 0.8}, {"time": 108.0, "seconds": 1.0}]}
    assert timeline(notes, by_process, started_at=100.0)["2"]["first_tuning_began"] == pytest.approx(5.2)
