"""bench/gemm_suite.py's summary and table for a run without Inductor (`--skip-inductor`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def shape(m: int, kernelpick_ms: float, tuning_s: float) -> dict[str, Any]:
    return {
        "m": m,
        "n": 64,
        "k": 32,
        "kernel_ms": {"torch": 1.0, "torch_again": 1.001, "kernelpick": kernelpick_ms},
        "noise": 0.001,
        "kernelpick": {"tuning_s": tuning_s, "choice": "triton_mm BLOCK_M=16"},
        "inductor": {"compile_s": None, "status": "skipped"},
    }


def test_a_run_without_inductor_is_summarized_and_tabled(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import gemm_suite
    finally:
        sys.path.remove(str(BENCH))
    shapes = [shape(16, 0.8, 2.0), shape(128, 1.0, 3.0)]
    summary = gemm_suite.summarize(shapes, None)
    assert summary["tuning_s_kernelpick_all_shapes"] == 5.0
    assert summary["tuning_s_inductor"] == 0.0
    assert summary["geomean_vs_cublas"] == pytest.approx((1.25 * 1.0) ** 0.5)
    target = f"geomean_vs_cublas >= {gemm_suite.TARGETS['geomean_vs_cublas']}"
    assert summary["targets"][target] is True
    assert summary["targets"]["tuning_s_kernelpick <= inductor"] is None  # not measured
    gemm_suite.print_table(shapes, summary)
    table = capsys.readouterr().out
    assert "5.0 (kernelpick, every shape)" in table
    assert "target tuning_s_kernelpick <= inductor: not measured" in table
