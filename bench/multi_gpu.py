"""Tuning on 1 GPU vs 2 and 4 (issues 5, 25): the 48-config bf16 matmul space, 8 shapes.

Each run is a fresh process with fresh caches; isolated runs differ only in KERNELPICK_DEVICES ("0",
"0,1", and "0,1,2,3" where 4 GPUs are seen). Another run tunes in the caller's process
(KERNELPICK_ISOLATE=off, one GPU): against the isolated run on GPU 0 it gives what isolation costs
on a real workload. Run on a 2- or 4-GPU machine:
PYTHONPATH=src:. python bench/multi_gpu.py — writes bench/results/multi_gpu-<device>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
          (4096, 1024, 4096), (1024, 4096, 4096), (2048, 8192, 2048), (8192, 2048, 4096)]  # fmt: skip


from autotune_vs_triton import triton_configs  # noqa: E402

import kernelpick  # noqa: E402
from kernelpick.demo import matmul_arguments, matmul_kernel  # noqa: E402

# Module-level, so that the worker processes can import it from this script.
TUNED = kernelpick.autotune(triton_configs(), key=["M", "N", "K"])(matmul_kernel)


def grid(meta: dict[str, Any]) -> tuple[int]:
    import triton

    return (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),)


def role() -> dict[str, Any]:
    import torch

    from kernelpick import settings
    from kernelpick.device import describe
    from kernelpick.workers import pool_for
    from kernelpick.workers.plan import worker_devices

    # The workers start once per process (importing torch, a CUDA context each): timed on its own.
    start = time.perf_counter()
    if settings.current().isolate != "off":
        pool_for(worker_devices(describe(torch.device("cuda", 0)))).start()
    startup = time.perf_counter() - start
    seconds, phases, picks = [], [], []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        start = time.perf_counter()
        TUNED[grid](*matmul_arguments(a, b, c))
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        record = TUNED.last_tuning
        phases.append(record.phases)
        picks.append({"config": str(record.best), "median_ms": record.results[record.best].median_ms})
    return {
        "startup_s": startup,
        "seconds_per_shape": seconds,
        "total_s": sum(seconds),
        "with_startup_s": startup + sum(seconds),
        "phases": phases,
        "picks": picks,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", default="")
    if parser.parse_args().role:
        print(json.dumps(role()))
        return
    import torch
    from common import environment, run_role, write_result

    report: dict[str, Any] = {"environment": environment(), "shapes": SHAPES}
    runs = {"0": ("0", "on"), "0,1": ("0,1", "on"), "in-process": ("0", "off")}
    if torch.cuda.device_count() >= 4:
        runs["0,1,2,3"] = ("0,1,2,3", "on")
    for name, (devices, isolate) in runs.items():
        work = tempfile.mkdtemp()
        env = {
            "KERNELPICK_DEVICES": devices,
            "KERNELPICK_ISOLATE": isolate,
            "KERNELPICK_CACHE_DIR": f"{work}/kp",
            "TRITON_CACHE_DIR": f"{work}/triton",
        }
        report[name] = run_role(Path(__file__), "tune", env)
        shapes = ", ".join(f"{s:.2f}" for s in report[name]["seconds_per_shape"])
        print(
            f"{name}: workers started in {report[name]['startup_s']:.1f} s, then tuned in "
            f"{report[name]['total_s']:.1f} s ({shapes})",
            flush=True,
        )
    report["speedup"] = report["0"]["total_s"] / report["0,1"]["total_s"]
    report["speedup_with_startup"] = report["0"]["with_startup_s"] / report["0,1"]["with_startup_s"]
    report["isolation_overhead_s"] = report["0"]["total_s"] - report["in-process"]["total_s"]
    if "0,1,2,3" in report:
        report["speedup_4"] = report["0"]["total_s"] / report["0,1,2,3"]["total_s"]
        report["speedup_4_with_startup"] = report["0"]["with_startup_s"] / report["0,1,2,3"]["with_startup_s"]
        print(
            f"4 GPUs {report['speedup_4']:.2f}x faster than 1 ({report['speedup_4_with_startup']:.2f}x "
            "counting the workers' start)"
        )
    print(
        f"wrote {write_result('multi_gpu', report)}; 2 GPUs {report['speedup']:.2f}x faster than 1 "
        f"({report['speedup_with_startup']:.2f}x counting the workers' start); isolation costs "
        f"{report['isolation_overhead_s']:.1f} s over {len(SHAPES)} x 48 configs"
    )


if __name__ == "__main__":
    main()
