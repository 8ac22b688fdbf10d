"""Tuning on 1 GPU vs 2 (issue 5): the 48-config bf16 matmul space of the foundation bench, 8 shapes.

Each run is a fresh process with fresh caches; the only difference is KERNELPICK_DEVICES ("0" or
"0,1"). Isolation is on (it is what spreads candidates over GPUs). Run on the 2-GPU machine:
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
from kernelpick.demo import matmul_kernel  # noqa: E402

# Module-level, so that the worker processes can import it from this script.
TUNED = kernelpick.autotune(triton_configs(), key=["M", "N", "K"], isolate=True)(matmul_kernel)


def grid(meta: dict[str, Any]) -> tuple[int]:
    import triton

    return (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),)


def role() -> dict[str, Any]:
    import torch

    seconds = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        start = time.perf_counter()
        TUNED[grid](
            a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)
        )
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return {"seconds_per_shape": seconds, "total_s": sum(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", default="")
    if parser.parse_args().role:
        print(json.dumps(role()))
        return
    from common import environment, run_role, write_result

    report: dict[str, Any] = {"environment": environment(), "shapes": SHAPES}
    for devices in ("0", "0,1"):
        work = tempfile.mkdtemp()
        env = {
            "KERNELPICK_DEVICES": devices,
            "KERNELPICK_CACHE_DIR": f"{work}/kp",
            "TRITON_CACHE_DIR": f"{work}/triton",
        }
        report[devices] = run_role(Path(__file__), "tune", env)
        print(f"devices {devices}: {report[devices]['total_s']:.1f} s", flush=True)
    report["speedup"] = report["0"]["total_s"] / report["0,1"]["total_s"]
    print(f"wrote {write_result('multi_gpu', report)}; 2 GPUs {report['speedup']:.2f}x faster than 1")


if __name__ == "__main__":
    main()
