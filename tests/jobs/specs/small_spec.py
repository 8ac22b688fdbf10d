"""A tuning spec for the tests: an autotuned add kernel at three sizes and a selector at two shapes."""

from __future__ import annotations

import torch
import triton

import kernelpick
from kernelpick.demo import add_kernel
from kernelpick.jobs import Job, tensor

spec_add = kernelpick.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 256})], key=["n"])(
    add_kernel
)


def fast_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def slow_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    for _ in range(20):
        torch.add(a, b)
    return a + b


adder = kernelpick.Selector("adder", [kernelpick.extern(slow_add), kernelpick.extern(fast_add)])


def add_job(n: int) -> Job:
    def run(device: torch.device) -> None:
        x = torch.randn(n, device=device)
        spec_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, x, torch.empty_like(x), n)

    return Job(f"spec_add n={n}", run)


JOBS = [add_job(n) for n in (64, 512, 4096)]
JOBS += [Job.select(adder, tensor("float32", m, 64), tensor("float32", m, 64)) for m in (8, 32)]
