"""Small-M GEMM: how far below HBM bandwidth cuBLAS runs, and which tiles (and split-K) close the gap.

At M = 16 and 128 a Llama projection is a read of the weight matrix: `x @ W.T` with W of N x K
bf16 moves N*K*2 bytes, and at ~4.8 TB/s an H200 could do 4096 x 4096 in ~7 us. This script
times, with `triton.testing.do_bench` (L2 flushed, median), on the 12 small-M shapes of
bench/gemm_suite.py:

- cuBLAS (`torch.mm`);
- a tiled Triton GEMM over a grid of narrow tiles (BLOCK_N down to 32, BLOCK_K up to 512);
- the same kernel split along K in SPLIT_K programs per tile: each writes its fp32 partial tile,
  and the program that arrives last (a per-tile counter, zeroed per call) sums them and stores.

It answers a design question (which config space and whether split-K earns its place in
`kernelpick.ops`), so the kernel here takes sizes as arguments and is compiled once per config.
Writes bench/results/gemm_small_m-<device>.json.

    PYTHONPATH=src python3 bench/gemm_small_m.py
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, write_result

NK_PAIRS = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (10240, 8192), (8192, 28672))


@triton.jit
def splitk_gemm(
    A, B, C, PARTIALS, COUNTERS, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = rm % M
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    k_chunk = K // SPLIT_K  # the caller makes K a multiple of SPLIT_K * BLOCK_K
    rk = pid_k * k_chunk + tl.arange(0, BLOCK_K)
    a_ptrs = A + ram[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = B + rk[:, None] * stride_bk + rbn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, k_chunk // BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K > 1:
        tile = pid_m * num_pid_n + pid_n
        partial = PARTIALS + (pid_k * M + rm[:, None]) * N + rn[None, :]
        tl.store(partial, acc, mask=mask)
        tl.debug_barrier()  # every thread's partial is written before the counter moves
        arrived = tl.atomic_add(COUNTERS + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:  # the last of the tile's programs sums the others' partials
            for other in range(0, SPLIT_K):
                if other != pid_k:
                    theirs = PARTIALS + (other * M + rm[:, None]) * N + rn[None, :]
                    acc += tl.load(theirs, mask=mask, other=0.0, cache_modifier=".cg")
            c_ptrs = C + rm[:, None] * stride_cm + rn[None, :] * stride_cn
            tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=mask)
    else:
        c_ptrs = C + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=mask)


def launcher(a: torch.Tensor, b: torch.Tensor, tile: tuple[int, ...]) -> Any:
    block_m, block_n, block_k, split_k, stages, warps = tile
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n), split_k)
    tiles = grid[0]

    def run() -> torch.Tensor:
        c = torch.empty(m, n, device=a.device, dtype=a.dtype)
        if split_k > 1:
            partials = torch.empty(split_k * m * n, device=a.device, dtype=torch.float32)
            counters = torch.zeros(tiles, device=a.device, dtype=torch.int32)
        else:
            partials = counters = c
        splitk_gemm[grid](
            a, b, c, partials, counters, m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split_k, GROUP_M=8,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip
        return c

    return run


def tiles_for(m: int) -> list[tuple[int, ...]]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, stages, warps) explored for this M."""
    if m <= 16:
        grid = itertools.product((16,), (32, 64, 128), (128, 256), (1, 2, 4, 8), (4, 6), (4,))
    else:
        grid = itertools.product((64, 128), (32, 64, 128), (64, 128), (1, 2, 4), (4,), (4, 8))
    return [t for t in grid if t[0] * t[1] <= 128 * 128 and not (t[0] == 128 and t[1] == 128 and t[5] == 4)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", default="16,128")
    parser.add_argument("--rep-ms", type=float, default=20.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    device = torch.device("cuda")
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for m in map(int, args.m.split(",")):
        for n, k in NK_PAIRS:
            gen = torch.Generator(device=device).manual_seed(m + n + k)
            a = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=gen)
            b = torch.randn(n, k, device=device, dtype=torch.bfloat16, generator=gen).t()
            expected = torch.mm(a, b)
            entry: dict[str, Any] = {"m": m, "n": n, "k": k, "weight_bytes": n * k * 2}
            entry["cublas_us"] = 1e3 * triton.testing.do_bench(
                functools.partial(torch.mm, a, b), rep=args.rep_ms
            )
            timed = []
            for tile in tiles_for(m):
                if k % (tile[2] * tile[3]):
                    continue
                run = launcher(a, b, tile)
                try:
                    out = run()
                    error = float((out.float() - expected.float()).abs().max())
                    us = 1e3 * triton.testing.do_bench(run, rep=args.rep_ms)
                except Exception as failure:  # out of resources and the like: recorded, not fatal
                    timed.append({"tile": tile, "error": f"{type(failure).__name__}: {str(failure)[:120]}"})
                    continue
                timed.append({"tile": tile, "us": us, "max_abs_error": error})
            ok = sorted((t for t in timed if "us" in t), key=lambda t: t["us"])
            entry["tiles"] = timed
            best = {s: next((t for t in ok if t["tile"][3] == s), None) for s in (1, 2, 4, 8)}
            entry["best_by_split"] = {str(s): t for s, t in best.items() if t}
            results.append(entry)
            line = f"M={m:4} N={n:5} K={k:5} cuBLAS {entry['cublas_us']:7.1f} us"
            for s, t in best.items():
                if t:
                    line += f" | S={s} {t['us']:6.1f} {t['tile'][:3]}+{t['tile'][4:]}"
            bw = entry["weight_bytes"] / (ok[0]["us"] * 1e-6) / 1e12 if ok else 0.0
            print(line + f" | best {bw:.2f} TB/s", flush=True)
    ratios = [r["cublas_us"] / min(t["us"] for t in r["tiles"] if "us" in t) for r in results]
    summary = {
        "geomean_cublas_over_best": math.exp(sum(map(math.log, ratios)) / len(ratios)),
        "seconds": time.perf_counter() - started,
    }
    print(summary)
    write_result("gemm_small_m", {"environment": environment(), "shapes": results, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
