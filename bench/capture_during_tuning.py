"""A program that captures CUDA graphs while a tuned kernel's new key is tuned in the background.

docs/selection.md says a graph captured during a background tuning keeps the provisional config it
recorded. This checks it where servers do it (warm-up calls, then capture at once): each run is a fresh
process whose first call of a `background=True` kernel queues the tuning, then captures and replays a
graph of that kernel and a torch op again and again for `--seconds`, counting the captures that raised
and the replays whose output was wrong; then it waits for the tuning and says whether it ended with a
pick, and captures once more with the pick. Isolation on (the GPU default: measured in workers) and
off (measured in the program's process, timed with CUDA events in the tuning thread).

Run from the repository root on a GPU machine:

    PYTHONPATH=src python3 bench/capture_during_tuning.py

Writes bench/results/capture_during_tuning-<device>.json (or `--out FOLDER`): per mode, each run's exit
code, seconds, captures, failed captures (with the first error) and wrong replays, the tuning's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
MODES = {"isolated": "on", "in_process": "off"}


def role(seconds: float) -> dict[str, Any]:
    """Run one program in this process: what its captures and the tuning did."""
    import torch
    from shutdown_probes import background_scale

    import kernelpick

    scale, x, out, grid = background_scale()
    scale[grid](x, out, x.numel())  # the warm-up call: queues the tuning
    torch.cuda.synchronize()
    provisional = scale.last_tuning is not None and scale.last_tuning.provisional

    def capture_and_replay() -> bool:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            scale[grid](x, out, x.numel())
            tripled = out.mul(3)
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        return bool(torch.equal(tripled, x * 6))

    captures = failed = wrong = 0
    first_error = ""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        captures += 1
        try:
            wrong += not capture_and_replay()
        except Exception as error:  # what the tuning beside it made of the capture
            failed += 1
            first_error = first_error or f"{type(error).__name__}: {error}"[:300]
            torch.cuda.synchronize()
    ended = kernelpick.wait_for_tuning(timeout=120)
    scale[grid](x, out, x.numel())  # switches to the pick
    torch.cuda.synchronize()
    record = scale.last_tuning
    return {
        "provisional_first": provisional,
        "captures": captures,
        "failed_captures": failed,
        "first_error": first_error,
        "wrong_replays": wrong,
        "tuning_ended": ended,
        "switched": record is not None and not record.provisional,
        "best": str(record.best) if record is not None else None,
        "statuses": sorted({r.status for r in record.results.values()}) if record is not None else [],
        "capture_after_switch_ok": capture_and_replay(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", action="store_true")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.role:
        print(json.dumps(role(args.seconds)), flush=True)
        return
    sys.path[:0] = [str(HERE.parent)]
    from common import environment, write_result

    report: dict[str, Any] = {"environment": environment(), "seconds": args.seconds, "modes": {}}
    for mode, isolate in MODES.items():
        runs = []
        for _ in range(args.runs):
            env = {
                **os.environ,
                "KERNELPICK_CACHE_DIR": tempfile.mkdtemp(prefix="kp-capture-"),
                "KERNELPICK_ISOLATE": isolate,
            }
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, str(HERE), "--role", "--seconds", str(args.seconds)],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            lines = done.stdout.strip().splitlines()
            try:
                seen = json.loads(lines[-1]) if lines else {}
            except json.JSONDecodeError:
                seen = {}
            runs.append(
                {
                    "exit": done.returncode,
                    "seconds": round(time.perf_counter() - started, 2),
                    **seen,
                    **({} if seen else {"stderr": done.stderr[-1500:]}),
                }
            )
            print(mode, runs[-1], flush=True)
        report["modes"][mode] = runs
    write_result("capture_during_tuning", report, args.out)


if __name__ == "__main__":
    main()
