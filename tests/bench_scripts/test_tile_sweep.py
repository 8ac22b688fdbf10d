"""bench/tile_sweep.py: the added tiles offered, told apart from the space's own, each re-timed
beside the reference; kept on the CPU with --tiny."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import BENCH, run_bench


def test_tiles_that_are_not_five_positive_integers_are_refused_by_name() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from tile_sweep import parse_tiles
    finally:
        sys.path.remove(str(BENCH))
    assert parse_tiles(" 64,64,128,6,4; 16,32,256,6,4 ;") == [(64, 64, 128, 6, 4), (16, 32, 256, 6, 4)]
    for bad in ("64,64,x,6,4", "64,64,128,6", "64,64,128,0,4"):
        with pytest.raises(SystemExit, match=f"--tiles: '{bad}' is not five positive integers"):
            parse_tiles(f"16,16,16,2,4;{bad}")


@pytest.mark.slow
@pytest.mark.parametrize(("op", "reference"), [("mm", "torch.mm"), ("scaled_mm", "torch._scaled_mm")])
def test_a_tiny_sweep_offers_the_added_tiles_and_times_them_beside_the_reference(
    tmp_path: Path, op: str, reference: str
) -> None:
    # The second tile clamps to each shape (16x32x64: 16 rows, 32 columns; 32x48x64: 32 rows, 64
    # columns); the third is one of the interpreter's own (for fp8 once clamped to a K of 32), so it
    # is not "added".
    tiles = "16,16,64,3,4;64,64,64,6,4;16,16,16,2,4"
    store = tmp_path / "store"  # a user's result store: the sweep measures with an empty one of its own
    run_bench(
        "tile_sweep.py",
        "--tiny",
        "--op",
        op,
        "--tiles",
        tiles,
        "--top",
        "9",
        "--out",
        str(tmp_path),
        env={"KERNELPICK_CACHE_DIR": str(store)},
    )
    assert not store.exists()
    data = json.loads((tmp_path / f"tile_sweep-{op}-cpu.json").read_text())
    assert data["tiles_added"] == [[16, 16, 64, 3, 4], [64, 64, 64, 6, 4], [16, 16, 16, 2, 4]]
    clamped = {(16, 32, 64): (16, 32, 64, 6, 4), (32, 48, 64): (32, 64, 64, 6, 4)}
    assert [tuple(shape["shape"]) for shape in data["shapes"]] == list(clamped)
    for shape in data["shapes"]:
        added = sorted(tuple(r["tile"]) for r in shape["rows"] if r["added"])
        assert added == sorted({(16, 16, 64, 3, 4), clamped[tuple(shape["shape"])]})
        assert any(r["choice"] == reference and r["vs_reference"] == 1.0 for r in shape["rows"])
        assert shape["pick"] in {r["choice"] for r in shape["rows"]} or shape["choices"] > 9
        assert len(shape["do_bench_rounds_ms"]["reference"]) == 5 and shape["ops_vs_reference"] > 0
