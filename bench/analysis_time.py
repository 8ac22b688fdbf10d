"""Median time to analyze one small kernel, uncached, TTIR generation included (issue 3).

Over every kernel of the test corpus available on this Triton (tests/analysis/corpus_*.py), 7 runs
each, after 3 warm-up analyses. Adds this Triton version's figures to
bench/results/analysis_time-<device>.json. Run with each Triton to compare:

    PYTHONPATH=src python bench/analysis_time.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "analysis")]

import triton  # noqa: E402
from access_corpus import CASES  # noqa: E402
from common import RESULTS, device_slug, environment  # noqa: E402

from kernelpick.analysis import analyze  # noqa: E402
from kernelpick.analysis.kernel_access import analyze_uncached  # noqa: E402

RUNS = 7


def main() -> None:
    cases = [c for c in CASES if c.available]
    for case in cases[:3]:
        args, kwargs = case.arguments()
        analyze_uncached(case.kernel, args, kwargs)
    per_kernel = {}
    for case in cases:
        args, kwargs = case.arguments()
        samples = []
        for _ in range(RUNS):
            start = time.perf_counter()
            analyze_uncached(case.kernel, args, kwargs)
            samples.append((time.perf_counter() - start) * 1e3)
        per_kernel[case.name] = statistics.median(samples)
    args, kwargs = cases[0].arguments()
    analyze(cases[0].kernel, *args, **kwargs)
    start = time.perf_counter()
    for _ in range(1000):
        analyze(cases[0].kernel, *args, **kwargs)
    memoized_us = (time.perf_counter() - start) / 1000 * 1e6
    env = environment()
    path = RESULTS / f"analysis_time-{device_slug(env['device'])}.json"
    data = json.loads(path.read_text()) if path.exists() else {"by_triton": {}}
    data["by_triton"][triton.__version__] = {
        "environment": env,
        "kernels": len(per_kernel),
        "runs_per_kernel": RUNS,
        "median_ms": statistics.median(per_kernel.values()),
        "slowest_ms": max(per_kernel.values()),
        "memoized_us": memoized_us,
        "per_kernel_median_ms": per_kernel,
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    entry = data["by_triton"][triton.__version__]
    print(
        f"triton {triton.__version__}: median {entry['median_ms']:.1f} ms over {entry['kernels']} kernels, "
        f"slowest {entry['slowest_ms']:.1f} ms; wrote {path}"
    )


if __name__ == "__main__":
    main()
