"""bench/llama_mlp.py: its sizes, figures, picks and results file, kept on the CPU with --dry."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import BENCH, run_bench

SCRIPT = BENCH / "llama_mlp.py"


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llama_mlp", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(*args: str) -> None:
    run_bench("llama_mlp.py", "--dry", *args)


def test_sizes_name_a_model_an_m_or_both() -> None:
    bench = bench_module()
    assert bench.sizes("", dry=False) == [
        (model, m) for model in ("8b", "70b") for m in (1, 4, 16, 128, 2048)
    ]
    assert bench.sizes("70b:2048,8b", dry=False) == [("8b", m) for m in (1, 4, 16, 128, 2048)] + [
        ("70b", 2048)
    ]
    assert bench.sizes("16", dry=False) == [("8b", 16), ("70b", 16)]
    with pytest.raises(SystemExit, match="8b:3"):
        bench.sizes("8b:3", dry=False)


@pytest.mark.slow
def test_a_dry_run_records_every_variant_and_the_next_run_adds_its_sizes(tmp_path: Path) -> None:
    run("--sizes", "8b:1", "--fused-gate-up", "--rounds", "2", "--out", str(tmp_path))
    run("--sizes", "70b:4", "--rounds", "2", "--out", str(tmp_path))
    data = json.loads((tmp_path / "llama_mlp-dry.json").read_text())
    assert [r["settings"]["dry"] for r in data["runs"]] == [True, True]
    assert data["environment"]["device"] == "cpu" and data["left"] == []
    entries = {(e["model"], e["m"]): e for e in data["sizes"]}
    assert set(entries) == {("8b", 1), ("70b", 4)} and data["summary"]["sizes"] == 2
    first, second = entries["8b", 1], entries["70b", 4]
    assert (first["run"], second["run"]) == (0, 1)
    assert set(first["kernel_ms"]) == {"eager", "eager_again", "inductor", "kernelpick", "kernelpick_fused"}
    assert set(second["kernel_ms"]) == {"eager", "eager_again", "inductor", "kernelpick"}
    for entry in (first, second):
        ms = entry["kernel_ms"]
        assert all(len(rounds) == 2 for rounds in entry["kernel_ms_rounds"].values())
        assert entry["speedup"]["kernelpick"]["inductor"] == pytest.approx(ms["inductor"] / ms["kernelpick"])
        assert entry["speedup"]["kernelpick"]["eager"] == pytest.approx(ms["eager"] / ms["kernelpick"])
        assert set(entry["first_call_s"]) >= {"eager", "inductor", "kernelpick"} and not entry["errors"]
        assert all(error < 1e-4 for error in entry["max_abs_error_vs_eager"].values())
        m, hidden, intermediate = entry["m"], entry["hidden"], entry["intermediate"]
        picks = entry["picks"]["kernelpick"]
        assert {p: picks[p]["shape"] for p in picks} == {
            "gate": [m, intermediate, hidden],
            "up": [m, intermediate, hidden],
            "down": [m, hidden, intermediate],
        }
        assert all(p["pick"] and p["choices"] > 1 for p in picks.values())
    # The fused block's own projection; its down projection was selected by the plain kernelpick block.
    assert first["picks"]["kernelpick_fused"]["gate_up"]["shape"] == [
        1,
        2 * first["intermediate"],
        first["hidden"],
    ]
