"""bench/background_ranks.py: the ranks of a job tuning in the background switch each key at one call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import run_bench


@pytest.mark.slow
def test_two_gloo_ranks_switch_every_key_to_one_pick_at_the_same_call(tmp_path: Path) -> None:
    run_bench("background_ranks.py", "--dry", "--out", str(tmp_path), "--max-s", "120", timeout=600)
    found = json.loads((tmp_path / "background_ranks-cpu.json").read_text())
    assert found["summary"] == {"every_key_final": True, "same_call": True, "same_pick": True}
    first, second = sorted(found["ranks"], key=lambda rank: rank["rank"])
    for name, key in first["keys"].items():
        assert key["switched_at"] == second["keys"][name]["switched_at"] > 1  # provisional first
