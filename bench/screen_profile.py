"""Where a selection's measuring time goes, per candidate: `kernelpick.ops.mm` at two GEMM-suite
shapes, selected in the caller's process (KERNELPICK_ISOLATE=0: the same measuring code a worker
runs) under cProfile, with fresh caches. The first shape pays the process's first-use costs; the
second shows the steady state.

Writes bench/results/screen_profile-<device>.json: each shape's tuning seconds and phases, and the
functions taking the most time inside measuring (cumulative and own seconds, calls).
Run: python bench/screen_profile.py [--shapes 16x6144x4096,128x4096x4096] [--measure eager|graph]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPES = [(16, 6144, 4096), (16, 4096, 4096)]


def _top(stats: pstats.Stats, key: str, count: int) -> list[dict[str, Any]]:
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda item: item[1][3 if key == "cumulative" else 2],
        reverse=True,
    )[:count]:
        rows.append(
            {
                "function": f"{Path(path).name}:{line}:{name}",
                "calls": calls,
                "own_s": own,
                "cumulative_s": cumulative,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES), help="MxNxK,...")
    parser.add_argument(
        "--measure", default="", help="KERNELPICK_MEASURE for the run (default: the setting's)"
    )
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in text.split("x")) for text in args.shapes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="screen-profile-"))
    os.environ.update(
        KERNELPICK_ISOLATE="0",
        KERNELPICK_CACHE_DIR=str(work / "kernelpick"),
        TRITON_CACHE_DIR=str(work / "triton"),
    )
    if args.measure:
        os.environ["KERNELPICK_MEASURE"] = args.measure
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from common import environment, write_result

    import kernelpick.ops

    report: dict[str, Any] = {
        "environment": environment(),
        "measure": args.measure or "default",
        "shapes": [],
    }
    for m, n, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        kernelpick.ops.mm(x, w.T)
        torch.cuda.synchronize()
        profile.disable()
        seconds = time.perf_counter() - started
        record = kernelpick.ops.selector("mm").last_selection
        stats = pstats.Stats(profile)
        shape = {
            "shape": [m, n, k],
            "seconds": seconds,
            "choices": len(record.results),
            "phases": dict(record.phases),
            "cumulative": _top(stats, "cumulative", 60),
            "own": _top(stats, "own", 40),
        }
        report["shapes"].append(shape)
        print(f"{m}x{n}x{k}: {seconds:.2f} s, {shape['choices']} choices, phases {shape['phases']}")
        for row in shape["own"][:25]:
            print(f"  own {row['own_s']:.3f} cum {row['cumulative_s']:.3f} x{row['calls']} {row['function']}")
    write_result("screen_profile" + (f"-{args.measure}" if args.measure else ""), report)


if __name__ == "__main__":
    main()
