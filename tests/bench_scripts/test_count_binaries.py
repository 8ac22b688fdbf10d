"""bench/count_binaries.py: the binaries kernelpick.ops.mm's templates compile over many shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def count_binaries(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    import count_binaries

    yield count_binaries
    sys.modules.pop("count_binaries", None)


def test_with_sizes_passed_shapes_whose_tiles_divide_alike_share_every_binary(
    count_binaries,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(count_binaries, "SHAPES", [(128, 4096, 4096)])
    one = count_binaries.count(False)
    # N = 6144 divides into every tile that 4096 does (and K is the same): the same configs render
    # the same sources, so the second shape compiles nothing more.
    monkeypatch.setattr(count_binaries, "SHAPES", [(128, 4096, 4096), (128, 6144, 4096)])
    baked, passed = count_binaries.count(True), count_binaries.count(False)
    assert one["binaries"] == one["template_choices"] > 0
    assert baked["template_choices"] == passed["template_choices"] == 2 * one["template_choices"]
    assert baked["binaries"] == 2 * one["binaries"]  # baked in: every choice of every shape
    assert passed["binaries"] == one["binaries"]
