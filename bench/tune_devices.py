"""`kernelpick tune --devices` on 1, 2 and 4 GPUs of this machine (issue 25): the 29 jobs of
bench/tune_cluster_spec.py, each run a fresh command with fresh caches (KERNELPICK_CACHE_DIR and
TRITON_CACHE_DIR), so every config is compiled: once per host, whichever GPU's process needs it.

Run on a machine of 2 or 4 GPUs from the repository root:

    PYTHONPATH=src:bench python bench/tune_devices.py            # --devices 0, 0,1 (and 0,1,2,3 with 4 GPUs)

Figures: each run's wall time, its speedup over one GPU, and each job's seconds and GPU model from
the run's journal (the longest job, and when the last job ended). Results:
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


def tune(devices: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="tune-devices-"))
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(work / "store"),
        "TRITON_CACHE_DIR": str(work / "triton"),
    }
    command = [sys.executable, "-m", "kernelpick.cli", "tune", str(SPEC), "--devices", devices]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=590, check=False)
    wall = time.perf_counter() - start
    journals = list((work / "store" / "tune-journals").glob("*.jsonl"))
    entries = [json.loads(line) for path in journals for line in path.read_text().splitlines()]
    jobs = sorted(entries, key=lambda e: -e["seconds"])
    return {
        "devices": devices,
        "returncode": done.returncode,
        "wall_s": wall,
        "jobs": len(entries),
        "failed": [e["job"] for e in entries if not e["ok"]],
        "job_seconds": {e["job"]: e["seconds"] for e in jobs},
        "longest_job": jobs[0]["job"] if jobs else None,
        "output_tail": done.stderr[-2000:],
    }


def main() -> None:
    import torch
    from common import environment, write_result

    count = torch.cuda.device_count()
    runs = [",".join(map(str, range(n))) for n in (1, 2, 4) if n <= count]
    report: dict[str, Any] = {"environment": environment(), "spec": str(SPEC.relative_to(HERE.parent))}
    for devices in runs:
        report[devices] = tune(devices)
        print(f"--devices {devices}: {report[devices]['wall_s']:.1f} s, rc {report[devices]['returncode']}")
    report["speedup"] = {
        devices: report["0"]["wall_s"] / report[devices]["wall_s"] for devices in runs if devices != "0"
    }
    report["targets"] = {
        f"{n} GPUs >= {target}x": report["speedup"].get(",".join(map(str, range(n))), 0.0) >= target
        for n, target in TARGETS.items()
        if n <= count
    }
    print(json.dumps({"speedup": report["speedup"], "targets": report["targets"]}, indent=2))
    print(f"wrote {write_result('tune_devices', report)}")


if __name__ == "__main__":
    main()
