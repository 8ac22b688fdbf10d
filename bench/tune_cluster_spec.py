"""The tuning spec of `bench/tune_cluster.py`: the GEMM suite's 24 shapes through `kernelpick.ops.mm`
and the demo's two kernels at a few sizes, each a job of `kernelpick tune`.

    kernelpick tune bench/tune_cluster_spec.py --ray local --export table.json
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton
from gemm_suite import SHAPES

import kernelpick
from kernelpick import ops
from kernelpick.demo import add_configs, add_kernel, matmul_arguments, matmul_configs, matmul_kernel
from kernelpick.jobs import Job


def process_created() -> float | None:
    """When this process was created, on the clock of time.time() (Linux: /proc), else None."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        stat = Path("/proc/stat").read_text().splitlines()
        boot = next(int(line.split()[1]) for line in stat if line.startswith("btime"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def note(event: str, **details: Any) -> None:
    """bench/tune_devices.py's timeline: when each process of a run was created, imported this spec
    and started and ended each job (a JSON line each to $TUNE_DEVICES_TIMELINE, where it is set)."""
    path = os.environ.get("TUNE_DEVICES_TIMELINE")
    if path:
        line = {"pid": os.getpid(), "event": event, "time": time.time(), "created": process_created()}
        with open(path, "a") as timeline:
            timeline.write(json.dumps({**line, **details}) + "\n")


def noted(name: str, run: Callable[[torch.device], Any]) -> Callable[[torch.device], Any]:
    """A job's function that notes when it starts and ends (its inputs, then its tuning)."""

    def job(device: torch.device) -> Any:
        note("job started", job=name)
        try:
            return run(device)
        finally:
            note("job ended", job=name)

    return job


note("spec imported")
GPU = torch.cuda.is_available()
#: Module-level, so that isolation workers can import them (as a user's module would bind them).
matmul = kernelpick.autotune(matmul_configs(GPU), key=["M", "N", "K"])(matmul_kernel)
add = kernelpick.autotune(add_configs(GPU), key=["n"])(add_kernel)
MATMUL_SIZES = (1024, 2048, 4096) if GPU else (32, 64)
ADD_SIZES = (1 << 20, 1 << 24) if GPU else (1 << 10, 1 << 12)
DTYPE = torch.float16 if GPU else torch.float32


def gemm_inputs(m: int, n: int, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 `x @ W.T` as in `nn.Linear`, as the GEMM suite times it."""
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    return a, torch.randn(n, k, device=device, dtype=torch.bfloat16).t()


def gemm_job(m: int, n: int, k: int) -> Job:
    # The FLOPs rank the jobs: on several GPUs the longest are dealt first.
    name = f"mm {m}x{n}x{k}"
    return Job(name, noted(name, lambda device: ops.mm(*gemm_inputs(m, n, k, device))), cost=2 * m * n * k)


def run_matmul(size: int, device: torch.device) -> torch.Tensor:
    a = torch.randn(size, size, device=device, dtype=DTYPE)
    b = torch.randn(size, size, device=device, dtype=DTYPE)
    c = torch.empty(size, size, device=device, dtype=DTYPE)
    matmul[lambda meta: (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)](
        *matmul_arguments(a, b, c)
    )
    return c


def run_add(length: int, device: torch.device) -> torch.Tensor:
    x, y = torch.randn(length, device=device), torch.randn(length, device=device)
    out = torch.empty_like(x)
    add[lambda meta: (triton.cdiv(length, meta["BLOCK"]),)](x, y, out, length)
    return out


def matmul_job(size: int) -> Job:
    name = f"demo matmul {size}"
    return Job(name, noted(name, lambda device: run_matmul(size, device)), cost=2 * size**3)


def add_job(length: int) -> Job:
    name = f"demo add {length}"
    return Job(name, noted(name, lambda device: run_add(length, device)), cost=length)


JOBS = [gemm_job(*shape) for shape in SHAPES]
JOBS += [matmul_job(size) for size in MATMUL_SIZES] + [add_job(length) for length in ADD_SIZES]
