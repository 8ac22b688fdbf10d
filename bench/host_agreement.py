"""Does a selection's host time per call agree with what the caller's own loop takes? (issue 38)

An eager selection ranks each choice by the larger of its device time and its host time per call
(`KERNELPICK_MEASURE=auto` on a GPU), the host time measured where the choices were timed (a
benchmark worker, or this process with `KERNELPICK_ISOLATE=off`). On the H200 of 2026-11-29
`ops.scaled_mm` picked Triton templates at launch-bound fp8 sizes where `torch._scaled_mm` ran
faster in the caller's own loop, its recorded host time 22-43 us against 11 us measured by the
suite: this script measures, for a few such sizes, each choice's host time three ways:

  recorded   the selection record's `timing.host_ms` (where the selection measured it)
  here       `kernelpick.bench.host.host_ms` on the same callable in this process
  loop       the caller's loop: calls back to back, wall time per call after a final synchronize

for `ops.scaled_mm` (fp8, per-tensor scales) and `ops.mm` (bf16), selected in workers (the
default) and in this process. Writes bench/results/host_agreement-<device>.json.

Run: PYTHONPATH=src python bench/host_agreement.py [--calls 400]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, write_result

SIZES = [(1, 4096, 4096), (16, 4096, 4096), (16, 6144, 4096), (128, 4096, 4096)]


def loop_us(fn: Any, calls: int) -> float:
    import torch

    for _ in range(10):
        fn()
    samples = []
    for _ in range(7):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e6 / calls)
    return statistics.median(samples)


def probe(op: str, m: int, n: int, k: int, calls: int) -> dict[str, Any]:
    import torch

    from kernelpick import ops
    from kernelpick.bench.host import host_ms
    from kernelpick.ops.scaled_mm import selector_name

    torch.manual_seed(0)
    if op == "scaled_mm":
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        args: tuple[Any, ...] = (a, b, one, one)
        call = lambda: ops.scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)  # noqa: E731
        selector = ops.selector(selector_name(torch.bfloat16))
    else:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
        args = (a, b)
        call = lambda: ops.mm(a, b)  # noqa: E731
        selector = ops.selector("mm")
    call()
    torch.cuda.synchronize()
    record = selector.last_selection
    rows = {}
    for name, result in record.results.items():
        timing = result.timing
        if timing is None:
            continue
        rows[name] = {
            "device_us": timing.median_ms * 1e3,
            "recorded_host_us": None if timing.host_ms is None else timing.host_ms * 1e3,
        }
    pick = selector.implementation(*args)
    reference = record.reference
    if op == "scaled_mm":
        ref_fn = lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        ref_fn = lambda: torch.mm(a, b)  # noqa: E731
    sync = torch.cuda.synchronize
    measured = {
        "pick": {
            "name": record.best,
            "here_host_us": host_ms(lambda: pick(*args), sync, 0.0) * 1e3,
            "loop_us": loop_us(lambda: pick(*args), calls),
        },
        "reference": {
            "name": reference,
            "here_host_us": host_ms(ref_fn, sync, 0.0) * 1e3,
            "loop_us": loop_us(ref_fn, calls),
        },
        "op_loop_us": loop_us(call, calls),
    }
    return {"op": op, "m": m, "n": n, "k": k, "choices": rows, "measured": measured}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--isolate", default=None, help="KERNELPICK_ISOLATE for this run (default: as set)")
    args = parser.parse_args()
    os.environ.setdefault("KERNELPICK_CACHE_DIR", tempfile.mkdtemp(prefix="host-agreement-"))
    if args.isolate is not None:
        os.environ["KERNELPICK_ISOLATE"] = args.isolate

    results = []
    for op in ("scaled_mm", "mm"):
        for m, n, k in SIZES:
            row = probe(op, m, n, k, args.calls)
            results.append(row)
            pm, rf = row["measured"]["pick"], row["measured"]["reference"]
            rec = row["choices"]
            print(
                f"{op} {m}x{n}x{k}: pick {pm['name'][:40]} recorded host "
                f"{rec.get(pm['name'], {}).get('recorded_host_us')} here {pm['here_host_us']:.1f} loop {pm['loop_us']:.1f}"
                f" | reference recorded {rec.get(rf['name'], {}).get('recorded_host_us')} here {rf['here_host_us']:.1f}"
                f" loop {rf['loop_us']:.1f} | op loop {row['measured']['op_loop_us']:.1f} us",
                flush=True,
            )
    name = "host_agreement" if args.isolate is None else f"host_agreement-isolate-{args.isolate}"
    path = write_result(
        name, {"environment": environment(), "calls": args.calls, "isolate": args.isolate, "rows": results}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
