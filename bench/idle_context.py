# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""What another process's idle CUDA context costs a small kernel, and so what kernelpick's idle workers cost.

Tutorial 03's matmul (tests/tune/real_kernels) at 1024^3 fp16, an 8 us kernel, is tuned in a fresh
process and then timed with `triton.testing.do_bench` (median) several times in a row, right after its
first call and again after a pause. Four ways, each in `--repeats` fresh processes:

- `triton`: under `triton.autotune`, alone on the GPU;
- `triton_beside_context`: the same while another process holds a CUDA context (and does nothing);
- `kernelpick`: under `kernelpick.autotune` as a user gets it (its workers end when tuning does);
- `kernelpick_workers_up`: the same with `KERNELPICK_WORKER_IDLE=3600` (its workers stay up, idle).

Per process: the first call's seconds, each `do_bench` figure and, for kernelpick, how many of its
workers were alive when it ran. Writes bench/results/idle_context-<device>.json.

    source bench/gpu_prelude.sh && python3 bench/idle_context.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, environment, median, require_kernelpick, run_role, write_result

WAYS = {
    "triton": {},
    "triton_beside_context": {},
    "kernelpick": {},
    "kernelpick_workers_up": {"KERNELPICK_WORKER_IDLE": "3600"},
}
HOLD_CONTEXT = "import torch, time; torch.ones(1, device='cuda').sum().item(); print('ready', flush=True); time.sleep(600)"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1024, help="M = N = K")
    parser.add_argument("--repeats", type=int, default=2, help="fresh processes per way")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    return parser.parse_args()


def workers_alive() -> int:
    from kernelpick.workers.pool import _pools

    return sum(w.alive for pool in _pools.values() for w in pool.workers)


def role(way: str, size: int) -> dict[str, Any]:
    import torch
    import triton
    import triton.testing
    from tests.tune.real_kernels import case_named

    import kernelpick

    case = case_named("03-matmul-fp16")
    tuner = kernelpick.autotune if way.startswith("kernelpick") else triton.autotune
    operation = case.build(tuner, case.configs())
    inputs = case.make_inputs({"M": size, "N": size, "K": size}, "cuda")
    other = None
    if way == "triton_beside_context":
        other = subprocess.Popen([sys.executable, "-c", HOLD_CONTEXT], stdout=subprocess.PIPE, text=True)
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
    try:
        torch.cuda.synchronize()
        started = time.perf_counter()
        operation(*inputs)
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - started
        timings = []
        for pause_s in (0, 0, 0, 0, 2, 0):
            time.sleep(pause_s)
            alive = workers_alive() if way.startswith("kernelpick") else None
            ms = triton.testing.do_bench(lambda: operation(*inputs), return_mode="median")
            timings.append(
                {"after_s": round(time.perf_counter() - started, 2), "ms": ms, "workers_alive": alive}
            )
    finally:
        if other is not None:
            other.kill()
    return {"first_call_s": first_call_s, "timings": timings}


def main() -> int:
    args = parse()
    if args.role:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(role(args.role, args.size)))
        return 0
    require_kernelpick()
    runs: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    for repeat in range(args.repeats):
        for way, env in WAYS.items():
            folder = Path(tempfile.mkdtemp(prefix=f"idle-{way}-"))
            env = {
                **env,
                "TRITON_CACHE_DIR": str(folder / "triton"),
                "KERNELPICK_CACHE_DIR": str(folder / "kp"),
            }
            result = run_role(Path(__file__), way, env, "--size", str(args.size))
            runs[way].append(result)
            figures = " ".join(f"{t['ms'] * 1e3:.1f}" for t in result["timings"])
            print(
                f"{way} #{repeat}: first call {result['first_call_s']:.1f} s; do_bench us: {figures}",
                flush=True,
            )
    summary = {
        way: {"median_ms": median([t["ms"] for r in results for t in r["timings"]])}
        for way, results in runs.items()
    }
    path = write_result(
        "idle_context",
        {
            "environment": environment(),
            "settings": {
                "size": args.size,
                "repeats": args.repeats,
                "timer": "triton.testing.do_bench median",
            },
            "runs": runs,
            "summary": summary,
        },
    )
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
