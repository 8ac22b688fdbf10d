"""Two runs of bench/gemm_suite.py side by side: an A/B of a setting (KERNELPICK_OPS_STATIC_SHAPES=0,
say), shape by shape, each run judged against its own `torch.mm` timings (the GPU's state drifts
between runs; a pick's ratio to cuBLAS in the same rounds does not).

    python bench/compare_suites.py BASE.json CHANGED.json [--out results/static_shapes_ab-h100.json]
    python bench/compare_suites.py small/base.json,large/base.json small/new.json,large/new.json

Each side may be several runs (comma-separated), read as one: a suite split over commands.

For every shape both runs measured: the pick (and whether it is the same choice), the pick's time
over `torch.mm`'s in each run and the change of that ratio, and each run's tuning seconds. The summary:
the worst and the geometric mean of the ratio's change over the shapes quiet in both runs (each run's
two `torch.mm` columns within 1 %), and each run's tuning seconds and geomean speedup over `torch.mm`
over all shapes.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from gemm_suite import NOISE_LIMIT, geomean  # the suite's own: what it calls noise, how it averages


def _vs_torch(entry: dict[str, Any]) -> float:
    times = entry["kernel_ms"]
    torch = [float(times[name]) for name in ("torch", "torch_again") if name in times]  # older runs: one
    return float(times["kernelpick"]) / min(torch)


def _geomean(values: list[float]) -> float:
    return geomean(values) or math.nan  # of no values: NaN, as the worst change's


def compare(base: dict[str, Any], changed: dict[str, Any]) -> dict[str, Any]:
    """Each shape both runs measured, and the summary (see the module's docstring)."""

    def by_shape(data: dict[str, Any]) -> dict[tuple[int, int, int, str], dict[str, Any]]:
        return {(e["m"], e["n"], e["k"], e.get("layout", "nt")): e for e in data["shapes"]}

    first, second = by_shape(base), by_shape(changed)
    rows = []
    for key in sorted(first.keys() & second.keys()):
        a, b = first[key], second[key]
        rows.append(
            {
                "shape": list(key[:3]),
                "pick": [a["kernelpick"]["choice"], b["kernelpick"]["choice"]],
                "same_pick": a["kernelpick"]["choice"] == b["kernelpick"]["choice"],
                "vs_torch": [_vs_torch(a), _vs_torch(b)],
                "change": _vs_torch(b) / _vs_torch(a),
                "quiet": a.get("noise", 1.0) < NOISE_LIMIT and b.get("noise", 1.0) < NOISE_LIMIT,
                "tuning_s": [a["kernelpick"]["tuning_s"], b["kernelpick"]["tuning_s"]],
            }
        )
    quiet = [row["change"] for row in rows if row["quiet"]]
    return {
        "shapes": rows,
        "summary": {
            "shapes": len(rows),
            "quiet_shapes": len(quiet),
            "same_pick": sum(row["same_pick"] for row in rows),
            # > 1: the changed run's picks are slower against cuBLAS than the base run's
            "change_worst_quiet": max(quiet, default=math.nan),
            "change_geomean_quiet": _geomean(quiet),
            "tuning_s": [sum(row["tuning_s"][0] for row in rows), sum(row["tuning_s"][1] for row in rows)],
            # each run's geomean speedup over cuBLAS (the faster of its two columns), every shape
            "geomean_vs_torch": [_geomean([1 / row["vs_torch"][side] for row in rows]) for side in (0, 1)],
        },
    }


def read_runs(paths: str) -> dict[str, Any]:
    """Comma-separated results files of bench/gemm_suite.py read as one run: their shapes and runs."""
    files = [json.loads(Path(path).read_text()) for path in paths.split(",")]
    return {
        "shapes": [entry for data in files for entry in data["shapes"]],
        "runs": [run for data in files for run in data.get("runs", [])],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the base run's results file(s), comma-separated")
    parser.add_argument("changed", help="the changed run's results file(s), comma-separated")
    parser.add_argument("--out", type=Path, help="write the comparison here as JSON")
    args = parser.parse_args()
    base, changed = read_runs(args.base), read_runs(args.changed)
    result = compare(base, changed)
    result["files"] = [args.base, args.changed]
    result["runs"] = [base["runs"], changed["runs"]]  # each run's date, device, versions, settings
    for row in result["shapes"]:
        m, n, k = row["shape"]
        print(
            f"{m:>5} {n:>6} {k:>6}  vs torch {row['vs_torch'][0]:.3f} -> {row['vs_torch'][1]:.3f} "
            f"({row['change']:.3f}{'' if row['quiet'] else ', noisy'})  tuning {row['tuning_s'][0]:.2f} -> "
            f"{row['tuning_s'][1]:.2f} s  {'same pick' if row['same_pick'] else ' -> '.join(row['pick'])}"
        )
    print(json.dumps(result["summary"], indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
