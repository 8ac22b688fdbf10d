"""Configs as points on typed dimensions, for strategies that step to neighbours or learn from features."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from kernelpick.config import Config
from kernelpick.search.space import Dimension, Space, config_values, dimensions_of

Point = tuple[int, ...]


class Grid:
    """The candidates placed on the dimensions along which they differ.

    A point is a config's position along each dimension; a neighbour differs along one dimension by
    `step` positions (the next power of two, the next warps or stages value).

    Raises:
        ConfigError: a candidate has a value its space's dimension lacks.
    """

    def __init__(self, candidates: Sequence[Config], space: Space | None = None) -> None:
        declared = space.dimensions if space is not None else dimensions_of(candidates)
        self.dimensions: tuple[Dimension, ...] = tuple(d for d in declared.values() if len(d) > 1)
        self.candidates = tuple(candidates)
        self._points: dict[Config, Point] = {}
        self._at: dict[Point, Config] = {}
        for config in self.candidates:
            values = config_values(config)
            point = tuple(d.position(values.get(d.name)) for d in self.dimensions)
            self._points[config] = point
            self._at.setdefault(point, config)

    def point(self, config: Config) -> Point:
        return self._points[config]

    def neighbours(self, config: Config, step: int = 1) -> list[Config]:
        """The candidates `step` positions away along one dimension, both ways, dimension by dimension."""
        point = self._points[config]
        found = []
        for axis in range(len(self.dimensions)):
            for direction in (-step, step):
                moved = (*point[:axis], point[axis] + direction, *point[axis + 1 :])
                neighbour = self._at.get(moved)
                if neighbour is not None:
                    found.append(neighbour)
        return found

    def around(self, config: Config, dimensions: int = 2) -> list[Config]:
        """The candidates one position away along up to `dimensions` dimensions at once (a tile
        taller and narrower, more warps and fewer stages ...)."""
        point = self._points[config]
        found = []
        for count in range(1, dimensions + 1):
            for axes in itertools.combinations(range(len(point)), count):
                for moves in itertools.product((-1, 1), repeat=count):
                    moved = list(point)
                    for axis, move in zip(axes, moves):
                        moved[axis] += move
                    neighbour = self._at.get(tuple(moved))
                    if neighbour is not None:
                        found.append(neighbour)
        return found

    def features(self, config: Config) -> list[float]:
        """Numbers a model can learn from: log2 of positive numbers, the number itself otherwise,
        one-hot positions for choices (strings, booleans, ...)."""
        point = self._points[config]
        row: list[float] = []
        for dimension, position in zip(self.dimensions, point):
            if dimension.ordered:
                value = float(dimension.values[position])
                row.append(math.log2(value) if min(dimension.values) > 0 else value)
            else:
                row.extend(1.0 if i == position else 0.0 for i in range(len(dimension)))
        return row
