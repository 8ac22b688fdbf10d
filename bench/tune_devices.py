"""`kernelpick tune --devices` on 1, 2 and 4 GPUs of this machine (issue 25): the jobs of
bench/tune_cluster_spec.py, each run a fresh command with fresh caches (KERNELPICK_CACHE_DIR and
TRITON_CACHE_DIR), so every config is compiled: once per host, whichever GPU's process needs it.

Run on a machine of 2 or 4 GPUs from the repository root:

    PYTHONPATH=src:bench python bench/tune_devices.py            # --devices 0, 0,1 (and 0,1,2,3 with 4 GPUs)
    PYTHONPATH=src:bench python bench/tune_devices.py --ray      # the same, then --ray local on 2 (and 4) GPUs

A `--ray local` run starts a Ray cluster of its own in the command's process (one actor per GPU it
sees; CUDA_VISIBLE_DEVICES gives it 2 or 4), so its figure counts Ray's start as well.

Figures: each run's wall time, its speedup over one GPU, and each job's seconds and GPU model from
the run's journal (the longest job, and when the last job ended); each tuning's seconds and phases,
by process, from the run's tuning log (`KERNELPICK_LOG`). Results:
bench/results/tune_devices-<device>.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC = HERE / "tune_cluster_spec.py"
TARGETS = {2: 1.8, 4: 3.4}  # speedup over one GPU (issue 25)
RAY_TARGET = 1.1  # a --ray run's wall time at most this times --devices on as many GPUs (issue 25)


def tune(devices: str, ray: bool = False) -> dict[str, Any]:
    """One fresh `kernelpick tune` of the spec: `--devices DEVICES`, or with `ray` `--ray local` on
    those GPUs alone (CUDA_VISIBLE_DEVICES)."""
    work = Path(tempfile.mkdtemp(prefix="tune-devices-"))
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(work / "store"),
        "TRITON_CACHE_DIR": str(work / "triton"),
        "KERNELPICK_LOG": str(work / "tunings.jsonl"),  # each tuning's phases, by process
        "TUNE_DEVICES_TIMELINE": str(work / "timeline.jsonl"),  # the spec's notes (tune_cluster_spec.note)
    }
    where = ["--ray", "local"] if ray else ["--devices", devices]
    if ray:
        env["CUDA_VISIBLE_DEVICES"] = devices
    command = [sys.executable, "-m", "kernelpick.cli", "tune", str(SPEC), *where]
    started_at, start = time.time(), time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=590, check=False)
    wall = time.perf_counter() - start
    journals = list((work / "store" / "tune-journals").glob("*.jsonl"))
    entries = [json.loads(line) for path in journals for line in path.read_text().splitlines()]
    jobs = sorted(entries, key=lambda e: -e["seconds"])
    by_process = tunings(work / "tunings.jsonl")
    return {
        "devices": devices,
        "ray": ray,
        "returncode": done.returncode,
        "wall_s": wall,
        # The command's start and end on the clock the tuning log's times are on: what the tunings
        # leave of the wall time is the command's start (interpreters, imports, workers) and end.
        "started_at": started_at,
        "ended_at": started_at + wall,
        "jobs": len(entries),
        "failed": [e["job"] for e in entries if not e["ok"]],
        "job_seconds": {e["job"]: e["seconds"] for e in jobs},
        "longest_job": jobs[0]["job"] if jobs else None,
        "tunings": by_process,
        "timeline": timeline(work / "timeline.jsonl", by_process, started_at),
        "output_tail": done.stderr[-2000:],
    }


def tunings(log: Path) -> dict[str, list[dict[str, Any]]]:
    """Each process's tunings in the order they ended (by pid): what was tuned, its seconds and
    its phases, so that a process's first tuning can be told from its later ones."""
    from kernelpick.reports import read_log

    by_process: dict[str, list[dict[str, Any]]] = {}
    if not log.exists():
        return by_process
    for entry in read_log(log):
        by_process.setdefault(str(entry["pid"]), []).append(
            {
                "time": entry["time"],
                "name": entry["name"],
                "key": entry["key_text"],
                "seconds": entry["seconds"],
                "phases": {k: round(v, 3) for k, v in (entry.get("phases") or {}).items()},
            }
        )
    for entries in by_process.values():
        entries.sort(key=lambda e: e["time"])
    return by_process


def timeline(
    notes: Path, by_process: dict[str, list[dict[str, Any]]], started_at: float
) -> dict[str, dict[str, float | None]]:
    """Each process of the run (the command's and every device's), in seconds from the command's
    start: when it was created, imported the spec, started its first job, began its first tuning
    (`tunings`' first, its end less its seconds) and ended its last job."""
    if not notes.exists():
        return {}
    events = [json.loads(line) for line in notes.read_text().splitlines()]
    first_tuning = {pid: min(t["time"] - t["seconds"] for t in ts) for pid, ts in by_process.items() if ts}

    def since(value: float | None) -> float | None:
        return None if value is None else round(value - started_at, 3)

    processes: dict[str, dict[str, float | None]] = {}
    for pid in dict.fromkeys(str(e["pid"]) for e in events):
        mine = [e for e in events if str(e["pid"]) == pid]
        starts = [e["time"] for e in mine if e["event"] == "job started"]
        ends = [e["time"] for e in mine if e["event"] == "job ended"]
        processes[pid] = {
            "created": since(mine[0]["created"]),
            "spec_imported": since(
                min((e["time"] for e in mine if e["event"] == "spec imported"), default=None)
            ),
            "first_job_started": since(min(starts, default=None)),
            "first_tuning_began": since(first_tuning.get(pid)),
            "last_job_ended": since(max(ends, default=None)),
        }
    return processes


def main() -> None:
    import argparse

    import torch
    from common import environment, require_kernelpick, write_result

    require_kernelpick()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ray", action="store_true", help="also `--ray local` on 2 (and 4) GPUs")
    args = parser.parse_args()
    count = torch.cuda.device_count()
    runs = [",".join(map(str, range(n))) for n in (1, 2, 4) if n <= count]
    report: dict[str, Any] = {"environment": environment(), "spec": str(SPEC.relative_to(HERE.parent))}
    for devices in runs:
        report[devices] = tune(devices)
        print(f"--devices {devices}: {report[devices]['wall_s']:.1f} s, rc {report[devices]['returncode']}")
        write_result("tune_devices", report)  # each run kept as it ends: a killed command loses one
    if args.ray:
        report["ray"] = {}
        for devices in runs[1:]:
            outcome = report["ray"][devices] = tune(devices, ray=True)
            print(f"--ray local on {devices}: {outcome['wall_s']:.1f} s, rc {outcome['returncode']}")
            write_result("tune_devices", report)
        report["ray_vs_devices"] = {
            devices: report["ray"][devices]["wall_s"] / report[devices]["wall_s"] for devices in runs[1:]
        }
    report["speedup"] = {
        devices: report["0"]["wall_s"] / report[devices]["wall_s"] for devices in runs if devices != "0"
    }
    report["targets"] = {
        f"{n} GPUs >= {target}x": report["speedup"].get(",".join(map(str, range(n))), 0.0) >= target
        for n, target in TARGETS.items()
        if n <= count
    }
    for devices, ratio in report.get("ray_vs_devices", {}).items():
        report["targets"][f"--ray on {devices} <= {RAY_TARGET}x --devices"] = ratio <= RAY_TARGET
    print(json.dumps({"speedup": report["speedup"], "targets": report["targets"]}, indent=2))
    print(f"wrote {write_result('tune_devices', report)}")


if __name__ == "__main__":
    main()
