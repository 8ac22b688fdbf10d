"""The built-in demo: tune a matmul and a vector add on whatever device is here, and report."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernelpick.console import headline
from kernelpick.device import DeviceInfo, describe
from kernelpick.store.text import candidate_name
from kernelpick.tune import Config, TuningRecord, autotune


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """C = A @ B with grouped program ordering for L2 reuse."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def matmul_arguments(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[Any, ...]:
    """`matmul_kernel`'s arguments for C = A @ B, meta-parameters left out."""
    (m, k), n = a.shape, b.shape[1]
    return (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x + y."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


#: The demo's config that fails on purpose, and why (what the demo says after its tables).
FAILING_CONFIG = Config({"BLOCK_M": 48, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 8})
FAILING_WHY = (
    "it fails on purpose: tl.arange takes a power-of-two length, and a block of 48 rows is not one; "
    "a config that fails is recorded with its reason and never picked, and the others are tuned"
)


#: How much of a failure's message `kernelpick demo --verbose` shows: a compile error's source line,
#: its caret and the error (Triton puts the kernel's source up to that line before them).
VERBOSE_LINES = 4


def matmul_configs(gpu: bool) -> list[Config]:
    """A small space; the last config is one the compiler rejects (`FAILING_CONFIG`: a block of 48
    is not a power of two), to show that a bad config is recorded with its reason and skipped."""
    blocks = (
        [(64, 64, 32), (128, 64, 32), (64, 128, 32), (128, 128, 64)] if gpu else [(16, 16, 16), (32, 32, 16)]
    )
    configs = [
        Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for m, n, k in blocks
        for w, s in ((4, 3), (8, 4))
    ]
    return [*configs, FAILING_CONFIG]


def add_configs(gpu: bool) -> list[Config]:
    blocks = (256, 1024, 4096) if gpu else (64, 256)
    return [Config({"BLOCK": b}, num_warps=w) for b in blocks for w in (2, 4)]


def run_demo() -> DemoRun:
    """Tune both kernels for one problem each (the first call of each tunes it, or reads the store)."""
    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    size, length = (4096, 1 << 24) if gpu else (32, 1 << 12)
    generator = torch.Generator(device=device).manual_seed(0)
    dtype = torch.float16 if gpu else torch.float32

    # Made anew on every run, to show the store at work: local objects, which worker processes
    # cannot import, so they are measured in this process.
    matmul = autotune(matmul_configs(gpu), key=["M", "N", "K"], isolate=False)(matmul_kernel)
    add = autotune(add_configs(gpu), key=["n"], isolate=False)(add_kernel)

    a = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    c = torch.empty(size, size, device=device, dtype=dtype)
    x = torch.randn(length, device=device, generator=generator)
    y = torch.randn(length, device=device, generator=generator)
    out = torch.empty_like(x)

    start = time.perf_counter()
    matmul[lambda meta: (triton.cdiv(size, meta["BLOCK_M"]) * triton.cdiv(size, meta["BLOCK_N"]),)](
        *matmul_arguments(a, b, c)
    )
    add[lambda meta: (triton.cdiv(length, meta["BLOCK"]),)](x, y, out, length)
    if gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start

    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2 * size**0.5)
    torch.testing.assert_close(out, x + y)
    assert matmul.last_tuning is not None and add.last_tuning is not None
    tunings = (matmul.last_tuning, add.last_tuning)
    return DemoRun(describe(device), {record.kernel: record for record in tunings}, seconds)


@dataclass(frozen=True, slots=True)
class DemoRun:
    """What `kernelpick demo` tuned, where, and how long the first calls took."""

    device: DeviceInfo
    records: dict[str, TuningRecord]
    seconds: float

    @property
    def cache_hit(self) -> bool:
        return all(r.from_store for r in self.records.values())

    def failures(self, verbose: bool = False) -> list[str]:
        """A line for each config that failed: which, and why (with `verbose`, the end of what the
        compiler or the launch said: the line it was at, and the error)."""
        lines = []
        for record in self.records.values():
            for config, result in record.failed.items():
                why = FAILING_WHY if config == FAILING_CONFIG else headline(result.message, 300)
                lines.append(
                    f"{record.kernel}'s config {candidate_name(config.to_dict())}: {result.status}; {why}"
                )
                if verbose:
                    lines += [f"    {line}" for line in result.message.strip().splitlines()[-VERBOSE_LINES:]]
        return lines

    def steps(self) -> list[str]:
        """A line for each kernel: where its tuning's time went (`TuningRecord.phases`)."""
        lines = []
        for record in self.records.values():
            spent = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in record.phases.items())
            source = "read from the store" if record.from_store else f"{len(record.results)} configs measured"
            lines.append(
                f"{record.kernel}: {source} in {record.seconds:.2f} s ({spent or 'nothing to time'})"
            )
        return lines

    def summary(self, verbose: bool = False) -> dict[str, Any]:
        """The JSON object `kernelpick demo --json` prints."""
        data = {
            "device": self.device.name,
            "device_label": self.device.label,
            "interpreter": self.device.interpreter,
            "n_configs": sum(max(1, len(r.results)) for r in self.records.values()),
            "n_failed": sum(len(r.failed) for r in self.records.values()),
            "best_config": {name: r.best.to_data() for name, r in self.records.items()},
            "tuning_seconds": self.seconds,
            "cache_hit": self.cache_hit,
        }
        if verbose:
            data["kernels"] = {name: r.to_dict() for name, r in self.records.items()}
        return data
