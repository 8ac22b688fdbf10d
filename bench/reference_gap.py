"""When `kernelpick.ops` picks the reference (`torch.mm`, `torch._scaled_mm`), is its call as fast?

The GEMM and fp8 suites time the pick through `ops.mm`/`ops.scaled_mm` with `triton.testing.do_bench`
and found it 1-6 % slower than calling the reference directly on some shapes where the pick is the
reference itself. This script tells the two possible causes apart, shape by shape:

- the GPU runs another kernel (the name and GPU time of every kernel each path launches, from
  `torch.profiler`, 50 calls each): then the two paths differ on the device;
- the same kernels for the same time: then the difference is in the timing (host time between the
  timer's events), not in what the GPU does.

Besides, do_bench medians of both paths in interleaved rounds (L2 flushed, as the suites time).

Run on a GPU machine from the repository root: `python3 bench/reference_gap.py`. Writes
bench/results/reference_gap-<device>.json (and to $OUT where set).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

#: (operation, M, N, K): shapes where the suites found the pick to be the reference and slower.
CASES = [
    ("mm", 8192, 10240, 8192),
    ("mm", 128, 4096, 4096),
    ("mm", 2048, 6144, 4096),
    ("scaled_mm", 128, 4096, 4096),
    ("scaled_mm", 128, 4096, 14336),
    ("scaled_mm", 2048, 28672, 4096),
]
ROUNDS = 7
CALLS = 50


def operands(op: str, m: int, n: int, k: int) -> tuple[Callable[[], Any], Callable[[], Any], str]:
    """The direct call of the reference, the call through kernelpick.ops, and the selector's name."""
    import torch

    from kernelpick import ops

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if op == "mm":
        return (lambda: torch.mm(a, w.t())), (lambda: ops.mm(a, w.t())), "mm"
    fp8 = torch.float8_e4m3fn
    a8, w8 = a.to(fp8), w.to(fp8)
    scale_a = torch.tensor(0.5, device="cuda")
    scale_b = torch.tensor(0.25, device="cuda")

    def direct() -> Any:
        return torch._scaled_mm(a8, w8.t(), scale_a, scale_b, out_dtype=torch.bfloat16)

    def through_ops() -> Any:
        return ops.scaled_mm(a8, w8.t(), scale_a, scale_b, out_dtype=torch.bfloat16)

    return direct, through_ops, "scaled_mm_bf16"


def kernels(fn: Callable[[], Any], calls: int = CALLS) -> dict[str, dict[str, float]]:
    """Each kernel `calls` calls of fn launch: its count and mean GPU microseconds, by name."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    found: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            found.setdefault(event.name, []).append(event.time_range.elapsed_us())
    return {name: {"count": len(t), "mean_us": statistics.fmean(t)} for name, t in found.items()}


def case(op: str, m: int, n: int, k: int) -> dict[str, Any]:
    import triton.testing

    from kernelpick import ops

    direct, through_ops, selector = operands(op, m, n, k)
    through_ops()  # tunes
    pick = ops.selector(selector).last_selection.best  # type: ignore[union-attr]
    paths = {"direct": direct, "ops": through_ops}
    medians: dict[str, list[float]] = {name: [] for name in paths}
    for round_number in range(ROUNDS):
        order = list(paths) if round_number % 2 == 0 else list(reversed(paths))
        for name in order:
            medians[name].append(float(triton.testing.do_bench(paths[name], rep=50, return_mode="median")))
    found = {name: kernels(fn) for name, fn in paths.items()}
    gpu_us = {
        name: sum(kernel["mean_us"] * kernel["count"] for kernel in found[name].values()) / CALLS
        for name in paths
    }
    entry = {
        "op": op,
        "shape": [m, n, k],
        "pick": pick,
        "do_bench_ms": {name: statistics.median(v) for name, v in medians.items()},
        "do_bench_rounds_ms": medians,
        "kernels": found,
        "gpu_us_per_call": gpu_us,
        "same_kernels": sorted(found["direct"]) == sorted(found["ops"]),
    }
    ratio = entry["do_bench_ms"]["direct"] / entry["do_bench_ms"]["ops"]
    print(
        f"{op} {m}x{n}x{k}: pick {pick}; do_bench ops/direct speed {ratio:.3f}; GPU us per call "
        f"{gpu_us['direct']:.2f} direct, {gpu_us['ops']:.2f} ops; same kernels {entry['same_kernels']}",
        flush=True,
    )
    return entry


def main() -> None:
    from common import environment, require_kernelpick, write_result

    require_kernelpick()
    report: dict[str, Any] = {"environment": environment(), "rounds": ROUNDS, "calls": CALLS, "cases": []}
    for op, m, n, k in CASES:
        report["cases"].append(case(op, m, n, k))
        write_result("reference_gap", report)
    print(f"wrote {write_result('reference_gap', report)}")


if __name__ == "__main__":
    main()
