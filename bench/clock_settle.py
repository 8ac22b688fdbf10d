"""How long a GPU stays warm: kernel times right after an idle gap, against the same kernel kept busy.

Selection warms a GPU up before it times any choice (`KERNELPICK_SELECT_WARMUP_MS`, 100 ms), so that
no choice is timed on idle clocks. A burst of tunings (a model's first forward: keys one right after
another) pays that at every key, although the GPU was busy a moment before. This measures after what
idle gap a GPU's first launches are slower than its steady ones.

For each gap (in random order, each several times): keep the GPU busy for 300 ms, sleep the gap, then
time 30 launches of a kernel one by one with CUDA events. Per gap: the median of the first 5 launches
and of the last 20 (steady), and their ratio; the SM clock before the first launch where NVML answers
(`torch.cuda.clock_rate`). Two kernels: a bf16 4096^3 product (~0.1 ms) and a 16x4096x4096 one (a
decode step's, ~10 us, timed 20 launches to an event pair).

    source bench/gpu_prelude.sh && python3 bench/clock_settle.py   # bench/results/clock_settle-h200.json
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from common import environment, write_result  # noqa: E402

GAPS_S = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
REPEATS = 3


def main() -> int:
    import torch

    big = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    skinny = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    kernels = {"mm_4096": (lambda: big @ big, 1), "mm_16x4096x4096": (lambda: skinny @ big, 20)}

    def busy(ms: float) -> None:
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end:
            for _ in range(8):
                big @ big
            torch.cuda.synchronize()

    def clock() -> int | None:
        try:
            return int(torch.cuda.clock_rate())
        except Exception:
            return None

    def probe(run: object, per_pair: int, launches: int = 30) -> list[float]:
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(launches)
        ]
        for start, end in pairs:
            start.record()
            for _ in range(per_pair):
                run()  # type: ignore[operator]
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) / per_pair for start, end in pairs]

    for run, per_pair in kernels.values():  # compiled and cuBLAS's handle made: not timed
        probe(run, per_pair, 3)
    trials = [(gap, name) for gap in GAPS_S for name in kernels for _ in range(REPEATS)]
    random.Random(0).shuffle(trials)
    raw: list[dict[str, object]] = []
    for gap, name in trials:
        run, per_pair = kernels[name]
        busy(300)
        time.sleep(gap)
        sm_clock = clock()
        times = probe(run, per_pair)
        first, steady = statistics.median(times[:5]), statistics.median(times[-20:])
        raw.append(
            {
                "gap_s": gap,
                "kernel": name,
                "clock_mhz": sm_clock,
                "ms": times,
                "first5_ms": first,
                "steady_ms": steady,
                "ratio": first / steady,
            }
        )
        print(
            f"{name:16s} gap {gap:5.2f} s  first5 {first * 1e3:8.1f} us  steady {steady * 1e3:8.1f} us  "
            f"x{first / steady:.3f}  clock {sm_clock}",
            flush=True,
        )
    summary = {
        name: {
            str(gap): statistics.median(r["ratio"] for r in raw if r["gap_s"] == gap and r["kernel"] == name)  # type: ignore[misc]
            for gap in GAPS_S
        }
        for name in kernels
    }
    print(json.dumps(summary, indent=1))
    data = {
        "environment": environment(),
        "gaps_s": GAPS_S,
        "repeats": REPEATS,
        "summary_first5_over_steady": summary,
        "raw": raw,
    }
    out = write_result("clock_settle", data)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
