"""bench/cold_path.py: the modules a cold selector call and a cold tuned kernel's call cross."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import run_bench


@pytest.mark.slow
def test_each_cold_call_lists_the_modules_it_crossed_in_order_and_those_entered_again(tmp_path: Path) -> None:
    run_bench("cold_path.py", "--out", str(tmp_path), timeout=600)
    calls = json.loads((tmp_path / "cold_path-cpu.json").read_text())["calls"]
    selector, autotune = calls["selector"], calls["autotune"]
    assert selector["modules"][0] == "kernelpick.select.selector"
    assert autotune["modules"][0] == "kernelpick.tune.autotuner"
    for found in (selector, autotune):
        assert found["module_count"] == len(found["modules"]) == len(set(found["modules"]))
        assert "kernelpick.bench.measure" in found["modules"]  # both fronts measure with one measurer
        assert all(found["entries"][module] >= 1 for module in found["modules"])
