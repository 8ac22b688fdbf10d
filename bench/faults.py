"""Real GPU faults mixed into a matmul space, for `kernelpick.autotune` and a `Selector`, all defined
inside a function (issues 5 and 22).

Planted: an out-of-bounds store (an illegal memory access, which breaks the CUDA context of the
process that runs it), a loop that never ends, a config needing more shared memory than the device
has, a choice whose launch asks for more GPU memory than there is, and a choice that computes the
wrong values. Records each candidate's status, the winner, the total time, and whether the caller's
CUDA context still works afterwards. Writes bench/results/faults-<device>.json.

Run on a GPU machine: PYTHONPATH=src:. python bench/faults.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

import kernelpick  # noqa: E402
from kernelpick import settings  # noqa: E402
from kernelpick.demo import matmul_arguments  # noqa: E402

SIZE = 2048


def grid(meta: dict[str, Any]) -> tuple[int]:
    return (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),)


def planted() -> tuple[Any, kernelpick.Selector]:
    """The tuned kernel and the selector, every fault defined here, inside a function: isolation needs
    nothing of a module (a worker never imports one), so they are measured in workers all the same."""

    @triton.jit
    def faulty_matmul(
        a_ptr, b_ptr, c_ptr, M, N, K,
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, FAULT: tl.constexpr,
    ):  # fmt: skip
        """C = A @ B; FAULT 1 stores far out of bounds, 2 never ends, 3 doubles the result."""
        pid_m = tl.program_id(0) // tl.cdiv(N, BLOCK_N)
        pid_n = tl.program_id(0) % tl.cdiv(N, BLOCK_N)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k * BLOCK_K + offs_k)[None, :] * stride_ak)
            b = tl.load(b_ptr + (k * BLOCK_K + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
            acc = tl.dot(a, b, acc)
        if FAULT == 2:
            # A loop without side effects is dead code to the compiler, however long it would run:
            # the store keeps it. 64 bits: a 32-bit counter wraps to negative in about a second.
            spin = tl.program_id(0).to(tl.int64) * 0
            while spin >= 0:
                spin += 1
                tl.store(
                    c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
                    acc.to(c_ptr.dtype.element_ty),
                )
        if FAULT == 3:
            acc = acc * 2
        offset = offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        if FAULT == 1:
            offset = offset.to(tl.int64) + (1 << 40)
        tl.store(c_ptr + offset, acc.to(c_ptr.dtype.element_ty))

    def _config(m: int, n: int, k: int, fault: int = 0, **options: int) -> kernelpick.Config:
        return kernelpick.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "FAULT": fault}, **options)

    SPACE = [
        _config(128, 128, 64, num_warps=8),
        _config(64, 128, 64, num_warps=4),
        _config(128, 256, 64, num_warps=8),
        _config(128, 128, 64, fault=1, num_warps=8),  # illegal memory access
        _config(128, 128, 64, fault=2, num_warps=8),  # never ends
        _config(256, 256, 256, num_warps=8, num_stages=5),  # needs more shared memory than there is
    ]
    TUNED = kernelpick.autotune(SPACE, key=["M", "N", "K"], isolate=True)(faulty_matmul)

    def bind(a: torch.Tensor, b: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        return matmul_arguments(a, b, c), c  # the demo's matmul takes the same arguments

    def exhaust_memory(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Asks for 100 TB of GPU memory."""
        torch.empty(100 << 40, dtype=torch.uint8, device=a.device)
        return a @ b

    SELECT = kernelpick.Selector(
        "faulty_mm",
        [
            kernelpick.extern(torch.mm, name="torch.mm"),
            kernelpick.extern(exhaust_memory, name="exhausts memory"),
            kernelpick.triton_choice(
                faulty_matmul,
                grid=grid,
                configs=[
                    _config(128, 128, 64, num_warps=8),
                    _config(128, 128, 64, fault=1, num_warps=8),
                    _config(128, 128, 64, fault=2, num_warps=8),
                    _config(128, 256, 64, fault=3, num_warps=8),  # wrong values
                    _config(256, 256, 256, num_warps=8, num_stages=5),
                ],
                bind=bind,
            ),
        ],
        isolate=True,
    )

    return TUNED, SELECT


def healthy() -> bool:
    try:
        return bool(torch.ones(1024, device="cuda").sum().item() == 1024.0)
    except Exception:
        return False


def main() -> None:
    import logging

    from common import environment, write_result

    logging.basicConfig(level=logging.INFO, format="%(relativeCreated)8.0f ms %(name)s: %(message)s")

    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.float16)
    b = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.float16)
    report: dict[str, Any] = {"environment": environment(), "size": SIZE, "defined_in_a_function": True}
    TUNED, SELECT = planted()
    with tempfile.TemporaryDirectory() as cache, settings.override(cache_dir=cache, bench_timeout_s=15.0):
        c = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.float16)
        start = time.perf_counter()
        TUNED[grid](*matmul_arguments(a, b, c))
        torch.cuda.synchronize()
        record = TUNED.last_tuning
        report["autotune"] = {
            "seconds": time.perf_counter() - start,
            "winner": str(record.best),
            "statuses": {
                str(cfg): {"status": r.status, "message": r.message[-300:]}
                for cfg, r in record.results.items()
            },
            "correct": bool(torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1.0)),
            "caller_healthy": healthy(),
        }
        start = time.perf_counter()
        out = SELECT(a, b)
        torch.cuda.synchronize()
        selection = SELECT.last_selection
        report["selector"] = {
            "seconds": time.perf_counter() - start,
            "winner": selection.best,
            "statuses": {
                row.name: {"status": row.result.status, "message": row.result.message[-300:]}
                for row in selection.candidates
            },
            "correct": bool(torch.allclose(out.float(), a.float() @ b.float(), rtol=1e-2, atol=1.0)),
            "caller_healthy": healthy(),
        }
    path = write_result("faults", report)
    print(f"wrote {path}")
    for part in ("autotune", "selector"):
        data = report[part]
        print(
            f"{part}: {data['seconds']:.1f} s, winner {data['winner']}, correct {data['correct']}, caller healthy {data['caller_healthy']}"
        )
        for name, row in data["statuses"].items():
            print(f"  {row['status']:17} {name}")


if __name__ == "__main__":
    main()
