"""bench/eager_path.py: each operation's eager call, its hot path and its stand-in pick, and every step
between them, timed on the CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.bench_scripts import run_bench


@pytest.mark.slow
def test_each_operation_is_timed_against_its_stand_in_pick_and_so_is_every_step(tmp_path: Path) -> None:
    run_bench("eager_path.py", "--calls", "200", "--repeats", "2", "--device", "cpu", "--out", str(tmp_path))
    data = json.loads((tmp_path / "eager_path-cpu.json").read_text())
    assert data["selectors"] == {"mm": "mm", "scaled_mm": "scaled_mm_bf16", "gated_mm": "gated_mm_silu"}
    for op, statements in data["statements"].items():
        assert list(statements)[:3] == ["op", "hot path", "pick"]
        assert {"places (3 reads a tensor)", "front lookup", "guard (Dynamo's TensorGuards)"} <= set(
            statements
        )
        assert ("grad mode and requires_grad (grad on)" in statements) == (op != "scaled_mm")  # no gradients
        assert list(data["median_ns"][op]) == list(data["least_ns"][op]) == list(statements)
        assert all(math.isfinite(value) for value in data["median_ns"][op].values())
        assert set(data["extra_ns"][op]) == {"op - pick", "hot path - pick", "op - hot path"}
