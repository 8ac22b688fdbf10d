"""bench/llama_mlp.py: its sizes, figures, picks and results file, kept on the CPU with --dry."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import BENCH, load_bench, run_bench

SCRIPT = BENCH / "llama_mlp.py"


def bench_module() -> ModuleType:
    return load_bench("llama_mlp.py")


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


def test_blocks_and_modes_are_named_from_their_lists() -> None:
    bench = bench_module()
    assert bench.listed("graph, eager", tuple(bench.MODES), "--modes") == ["eager", "graph"]
    with pytest.raises(SystemExit, match="expected names of mlp, attn"):
        bench.listed("mlp,ffn", bench.BLOCKS, "--blocks")


@pytest.mark.slow
def test_a_dry_run_records_every_variant_and_the_next_run_adds_its_sizes(tmp_path: Path) -> None:
    run("--sizes", "8b:1", "--fused-gate-up", "--gated", "--rounds", "2", "--out", str(tmp_path))
    run(
        "--sizes", "70b:4", "--blocks", "attn", "--modes", "compiled", "--rounds", "2", "--out", str(tmp_path)
    )
    data = json.loads((tmp_path / "llama_mlp-dry.json").read_text())
    assert [r["settings"]["dry"] for r in data["runs"]] == [True, True]
    assert data["runs"][1]["settings"]["modes"] == ["compiled"]
    assert data["environment"]["device"] == "cpu" and data["left"] == []
    entries = {(e["model"], e["block"], e["m"]): e for e in data["sizes"]}
    assert set(entries) == {("8b", "mlp", 1), ("8b", "attn", 1), ("70b", "attn", 4)}
    assert data["summary"]["sizes"] == 3
    mlp, attention, second = entries["8b", "mlp", 1], entries["8b", "attn", 1], entries["70b", "attn", 4]
    assert (mlp["run"], attention["run"], second["run"]) == (0, 0, 1)
    every = {
        "eager",
        "eager_again",
        "kernelpick_eager",
        "inductor",
        "kernelpick",
        "inductor_graph",
        "kernelpick_graph",
    }
    gated = {"kernelpick_gated_eager", "kernelpick_gated", "kernelpick_gated_graph"}
    assert set(mlp["kernel_ms"]) == every | {"kernelpick_fused"} | gated
    assert set(attention["kernel_ms"]) == every
    assert set(second["kernel_ms"]) == {"eager", "eager_again", "inductor", "kernelpick"}
    for entry in (mlp, attention, second):
        ms = entry["kernel_ms"]
        assert all(len(rounds) == 2 for rounds in entry["kernel_ms_rounds"].values())
        for kernelpick, baseline in (("kernelpick", "inductor"), ("kernelpick_graph", "inductor_graph")):
            if kernelpick in ms:
                assert entry["speedup"][kernelpick][baseline] == pytest.approx(ms[baseline] / ms[kernelpick])
        assert not entry["errors"] and entry["hbm_floor_us"] is None
        assert all(error < 1e-4 for error in entry["max_abs_error_vs_eager"].values())
    # Each projection's pick, recorded by the first kernelpick variant that selected it.
    m, hidden, intermediate = 1, mlp["hidden"], mlp["intermediate"]
    picks = mlp["picks"]["kernelpick_eager"]
    assert {p: picks[p]["shape"] for p in picks} == {
        "gate": [m, intermediate, hidden],
        "up": [m, intermediate, hidden],
        "down": [m, hidden, intermediate],
    }
    assert all(p["pick"] and p["choices"] > 1 for p in picks.values())
    assert mlp["picks"]["kernelpick_fused"]["gate_up"]["shape"] == [1, 2 * intermediate, hidden]
    assert mlp["picks"]["kernelpick_gated_eager"]["gated"]["shape"] == [1, intermediate, hidden]
    columns = hidden + 2 * 16  # DRY_KV_COLUMNS
    assert {p: v["shape"] for p, v in attention["picks"]["kernelpick_eager"].items()} == {
        "qkv": [1, columns, hidden],
        "o": [1, hidden, hidden],
    }
    assert set(second["picks"]["kernelpick"]) == {"qkv", "o"}
    summary = data["summary"]
    assert summary["kernelpick_vs_inductor_min"] == min(
        e["speedup"]["kernelpick"]["inductor"] for e in entries.values()
    )
    assert "kernelpick_graph_vs_inductor_graph_min" in summary and "kernelpick_eager_vs_eager_min" in summary
