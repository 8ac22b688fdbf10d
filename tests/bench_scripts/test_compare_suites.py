"""bench/compare_suites.py: two GEMM-suite runs side by side, each against its own torch timings."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench_scripts import run_bench

BENCH = Path(__file__).resolve().parents[2] / "bench"


def entry(
    m: int, pick: str, kernelpick: float, torch: float, tuning_s: float, noise: float = 0.0
) -> dict[str, Any]:
    return {
        "m": m,
        "n": 64,
        "k": 32,
        "layout": "nt",
        "kernelpick": {"choice": pick, "tuning_s": tuning_s},
        "kernel_ms": {"kernelpick": kernelpick, "torch": torch, "torch_again": torch * 1.002},
        "noise": noise,
    }


def test_each_run_is_judged_against_its_own_torch_timings(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from compare_suites import compare
    finally:
        sys.path.remove(str(BENCH))
    # The second run's GPU is 10 % slower throughout: the picks kept their ratio to torch at M = 1,
    # lost 5 % at M = 16; M = 128 is noisy in the second run and is left out of the summary.
    base = {
        "shapes": [
            entry(1, "a", 1.0, 1.0, 2.0),
            entry(16, "b", 0.9, 1.0, 3.0),
            entry(128, "c", 1.0, 1.0, 4.0),
        ]
    }
    changed = {
        "shapes": [
            entry(1, "a", 1.1, 1.1, 1.0),
            entry(16, "d", 0.9 * 1.1 * 1.05, 1.1, 1.5),
            entry(128, "c", 2.0, 1.1, 1.0, noise=0.05),
        ]
    }
    result = compare(base, changed)
    assert [row["same_pick"] for row in result["shapes"]] == [True, False, True]
    assert result["shapes"][1]["change"] == pytest.approx(1.05)
    summary = result["summary"]
    assert summary["quiet_shapes"] == 2 and summary["same_pick"] == 2
    assert summary["change_worst_quiet"] == pytest.approx(1.05)
    assert summary["change_geomean_quiet"] == pytest.approx(math.sqrt(1.05))
    assert summary["tuning_s"] == [9.0, 3.5]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(base))
    second.write_text(json.dumps(changed))
    run_bench("compare_suites.py", str(first), str(second), "--out", str(tmp_path / "ab.json"))
    assert json.loads((tmp_path / "ab.json").read_text())["summary"] == json.loads(json.dumps(summary))


def test_a_side_split_over_several_runs_is_read_as_one(tmp_path: Path) -> None:
    # A suite run over two commands (small M, then large M) on each side.
    files = {}
    for name, shapes in {
        "base_small": [entry(1, "a", 1.0, 1.0, 2.0)],
        "base_large": [entry(128, "c", 1.0, 1.0, 4.0)],
        "new_small": [entry(1, "a", 1.0, 1.0, 1.0)],
        "new_large": [entry(128, "c", 1.1, 1.0, 3.0)],
    }.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"shapes": shapes, "runs": [{"date": name}]}))
    out = tmp_path / "ab.json"
    run_bench(
        "compare_suites.py",
        f"{files['base_small']},{files['base_large']}",
        f"{files['new_small']},{files['new_large']}",
        "--out",
        str(out),
    )
    result = json.loads(out.read_text())
    assert [row["shape"][0] for row in result["shapes"]] == [1, 128]
    assert result["summary"]["tuning_s"] == [6.0, 4.0]
    assert result["summary"]["change_worst_quiet"] == pytest.approx(1.1)
    assert result["summary"]["geomean_vs_torch"] == pytest.approx([1.0, math.sqrt(1 / 1.1)])
    assert result["runs"] == [
        [{"date": "base_small"}, {"date": "base_large"}],
        [{"date": "new_small"}, {"date": "new_large"}],
    ]
