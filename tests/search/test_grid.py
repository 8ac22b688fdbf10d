"""search/grid.py: candidates as points, so strategies step to neighbouring values and learn
from features, whether or not a Space declared the dimensions."""

from __future__ import annotations

import math

import pytest

from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.grid import Grid
from kernelpick.search.space import Space

SPACE = Space(BLOCK=[16, 32, 64, 128], num_warps=[2, 4, 8], MODE=["a", "b"], GROUP=[8])


def _config(block: int, warps: int, mode: str = "a") -> Config:
    return Config({"BLOCK": block, "MODE": mode, "GROUP": 8}, num_warps=warps)


def test_neighbours_are_the_next_values_along_each_dimension_that_are_candidates() -> None:
    candidates = [c for c in SPACE.configs() if c != _config(64, 8)]  # one left out, say by a constraint
    grid = Grid(candidates, SPACE)
    assert [d.name for d in grid.dimensions] == ["BLOCK", "num_warps", "MODE"]  # GROUP does not vary
    centre = _config(64, 4)
    assert grid.neighbours(centre) == [_config(32, 4), _config(128, 4), _config(64, 2), _config(64, 4, "b")]
    assert grid.neighbours(centre, step=2) == [_config(16, 4)]
    assert _config(128, 8) in grid.around(centre) and _config(32, 2) in grid.around(centre)
    assert len(grid.around(centre, dimensions=1)) == 4


def test_without_a_space_the_dimensions_are_read_off_the_candidates() -> None:
    candidates = [_config(b, w) for b in (64, 16, 32) for w in (4, 8)]
    grid = Grid(candidates)
    assert [(d.name, d.values) for d in grid.dimensions] == [("BLOCK", (16, 32, 64)), ("num_warps", (4, 8))]
    assert grid.neighbours(_config(32, 4)) == [_config(16, 4), _config(64, 4), _config(32, 8)]


def test_features_are_log2_of_numbers_and_one_hot_choices() -> None:
    grid = Grid(SPACE.configs(), SPACE)
    assert grid.features(_config(64, 8, "b")) == [6.0, 3.0, 0.0, 1.0]
    numbers = Grid([Config({"SCALE": s}) for s in (0, 0.5, 2)])
    assert numbers.features(Config({"SCALE": 0.5})) == [0.5]  # not all positive: the value itself
    assert math.isclose(
        Grid([Config({"X": 3}), Config({"X": 6})]).features(Config({"X": 6}))[0], math.log2(6)
    )


def test_a_candidate_outside_its_space_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"BLOCK=48 is not one of the dimension's values \[16, 32, 64, 128\]"
    ):
        Grid([_config(48, 4)], SPACE)
