"""Does kernelpick time what it claims? Every choice of `ops.mm` on the GEMM suite's shapes, four ways.

For each shape (bf16 `x @ W.T`, the 24 shapes of `gemm_suite.py`), `kernelpick.ops.mm` selects on
the default path (isolated workers, `KERNELPICK_TIMER=auto`); then, in this one process, every choice
it had is timed again by:

- `do_bench`: `triton.testing.do_bench`, median (CUDA events, 256 MB cache flush, back-to-back);
- `profiler`: Inductor's `do_bench_using_profiling` (kernel durations from CUPTI, mean);
- kernelpick's own timers, `cudagraph`, `profiler` and `events`, with the selection's budgets;

and the figure the selection recorded (its device median, `selected`) is compared with each. The
distribution of |kernelpick / reference - 1| is printed per timer, and the raw figures go to
bench/results/timer_agreement-<device>.json with how long each timer took per choice.

    PYTHONPATH=src python3 bench/timer_agreement.py [--shapes 0,6,12] [--choices 8]
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
from gemm_suite import SHAPES


class Call:
    """A choice's hot-path callable on fixed operands, as a Benchmarkable."""

    def __init__(self, name: str, fn: Any, a: Any, b: Any) -> None:
        self.name, self._fn, self._a, self._b = name, fn, a, b

    def setup(self) -> None:
        pass

    def run(self) -> None:
        self._fn(self._a, self._b)

    def teardown(self) -> None:
        pass


def back_to_back_ms(run: Any, torch: Any, calls: int = 200) -> float:
    """Milliseconds per call of back-to-back calls, host and device together, no flush (as gemm_suite)."""
    run()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3 / calls


def distribution(ratios: list[float]) -> dict[str, float]:
    errors = sorted(abs(r - 1.0) for r in ratios)
    return {
        "n": len(errors),
        "median": statistics.median(errors),
        "p90": errors[int(0.9 * (len(errors) - 1))],
        "max": errors[-1],
        "within_2pct": sum(e <= 0.02 for e in errors) / len(errors),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="", help="indices into the 24 suite shapes (default: all)")
    parser.add_argument("--choices", type=int, default=0, help="time only the N fastest choices per shape")
    args = parser.parse_args()
    os.environ.setdefault("KERNELPICK_CACHE_DIR", tempfile.mkdtemp(prefix="timer-agreement-"))

    import torch
    import triton.testing
    from common import environment, write_result
    from torch._inductor.utils import do_bench_using_profiling

    import kernelpick
    from kernelpick import settings
    from kernelpick.bench.benchmarker import budgets_for
    from kernelpick.bench.host import host_ms
    from kernelpick.bench.timers import timer_for
    from kernelpick.device import describe

    device = torch.device("cuda", 0)
    info = describe(device)
    timers = {}
    for name in ("cudagraph", "profiler", "events"):
        with settings.override(timer=name):
            timers[name] = timer_for(info)
    budgets = budgets_for(info, per_call=True)
    wanted = {int(i) for i in args.shapes.split(",") if i}
    rows: list[dict[str, Any]] = []
    for index, (m, n, k) in enumerate(SHAPES):
        if wanted and index not in wanted:
            continue
        gen = torch.Generator(device=device).manual_seed(index)
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16, generator=gen).t()
        selector = kernelpick.ops.selector("mm")
        started = time.perf_counter()
        record = selector.tune(a, b)
        tuning_s = time.perf_counter() - started
        choices = {c.name: c for c in selector.choices_for(a, b)}
        measured = [r for r in record.candidates if r.result.ok]
        if args.choices:
            measured = measured[: args.choices]
        signature = record.signature
        print(f"[{m}x{n}x{k}] {len(measured)} choices, picked {record.best} ({tuning_s:.1f} s)", flush=True)
        for row in measured:
            fn = choices[row.name].callable_for(signature)
            call = Call(row.name, fn, a, b)
            fn(a, b)
            torch.cuda.synchronize()
            entry: dict[str, Any] = {
                "shape": [m, n, k],
                "choice": row.name,
                "picked": row.name == record.best,
                "selected_ms": row.result.timing.median_ms,
                "selected_cost_ms": row.result.cost_ms,
                "selected_timer": row.result.timing.timer,
                "selected_spread": row.result.timing.spread,
            }
            started = time.perf_counter()
            entry["do_bench_ms"] = float(triton.testing.do_bench(call.run, return_mode="median"))
            entry["do_bench_s"] = time.perf_counter() - started
            started = time.perf_counter()
            entry["inductor_profiler_ms"] = float(do_bench_using_profiling(call.run))
            entry["inductor_profiler_s"] = time.perf_counter() - started
            entry["selected_host_ms"] = row.result.timing.host_ms
            entry["host_ms"] = host_ms(call.run, torch.cuda.synchronize, entry["inductor_profiler_ms"])
            entry["back_to_back_ms"] = back_to_back_ms(call.run, torch)
            for name, timer in timers.items():
                started = time.perf_counter()
                samples = timer.measure(call, budgets["screening"])
                entry[f"{name}_ms"] = statistics.median(samples)
                entry[f"{name}_runs"] = len(samples)
                entry[f"{name}_fell_back"] = call.name in getattr(timer, "fell_back", ())
                entry[f"{name}_s"] = time.perf_counter() - started
            rows.append(entry)
            print(
                f"  {row.name[:48]:48} selected {entry['selected_ms']:.4f}  do_bench {entry['do_bench_ms']:.4f}  "
                f"profiler {entry['inductor_profiler_ms']:.4f}  graph {entry['cudagraph_ms']:.4f}  "
                f"ours-prof {entry['profiler_ms']:.4f}  events {entry['events_ms']:.4f}  "
                f"host {entry['selected_host_ms'] or 0:.4f}/{entry['host_ms']:.4f}  b2b {entry['back_to_back_ms']:.4f}",
                flush=True,
            )
    comparisons: dict[str, dict[str, float]] = {}
    for ours in ("selected", "cudagraph", "profiler", "events"):
        for reference in ("do_bench", "inductor_profiler"):
            comparisons[f"{ours}/{reference}"] = distribution(
                [r[f"{ours}_ms"] / r[f"{reference}_ms"] for r in rows]
            )
    comparisons["do_bench/inductor_profiler"] = distribution(
        [r["do_bench_ms"] / r["inductor_profiler_ms"] for r in rows]
    )
    cost = {
        name: statistics.median(r[f"{name}_s"] for r in rows)
        for name in ("do_bench", "inductor_profiler", "cudagraph", "profiler", "events")
    }
    report = {
        "environment": environment(),
        "rows": rows,
        "agreement": comparisons,
        "seconds_per_choice": cost,
    }
    path = write_result("timer_agreement", report)
    print(f"\nwrote {path}\n\n|figure / reference - 1| over {len(rows)} choices:")
    print(f"{'':36}{'median':>8}{'p90':>8}{'max':>8}{'<=2%':>7}")
    for name, d in comparisons.items():
        print(f"{name:36}{d['median']:8.3%}{d['p90']:8.3%}{d['max']:8.3%}{d['within_2pct']:7.0%}")
    print("seconds per choice:", {k: round(v, 3) for k, v in cost.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
