"""Model-guided search: a random forest learns time from config features and picks the next batch."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.base import Batch, Evaluation, SearchStrategy, best, latest
from kernelpick.search.grid import Grid
from kernelpick.search.options import Option


class ModelGuidedSearch(SearchStrategy):
    """Bayesian-style optimisation with a random-forest surrogate (scikit-learn, `kernelpick[search]`).

    It times `initial` random candidates; then, batch after batch, it fits a forest on log(time) of
    what has been timed (a failure counts as twice the slowest time, so the model learns where
    configs fail) and times `batch_size` untimed candidates:

    - up to `local` of the best config's untimed neighbours (one position away along one or two
      dimensions) that the forest predicts fastest, none predicted over twice the best's time;
    - then, in turn, the fastest by one tree of the forest after another (Thompson sampling: the
      trees disagree where the model knows little, so this explores) and those of highest
      expected improvement over the best (the trees' spread as the uncertainty);
    - `explore` of them drawn at random.

    It stops once `stop_after` batches in a row improved the best by less than `min_gain` and the
    best's neighbourhood holds nothing promising, or when every candidate is timed.

    Raises:
        ConfigError: scikit-learn is not installed.
    """

    name = "model"
    initial = Option(32, "Random candidates timed before the model is fitted.", minimum=1)
    batch_size = Option(24, "Configs timed per batch.", minimum=1)
    local = Option(16, "Most of a batch taken from the best config's neighbours.", minimum=0)
    explore = Option(2, "Configs of a batch drawn at random.", minimum=0)
    stop_after = Option(
        3, "Batches in a row improving the best by less than min_gain before it stops.", minimum=1
    )
    min_gain = Option(0.005, "Improvement of the best (a fraction) that counts as progress.", minimum=0)
    trees = Option(48, "Trees of the random forest.", minimum=1)
    local_slowdown = Option(
        2.0, "Neighbours predicted slower than the best by more than this factor are not timed.", minimum=1
    )

    def prepare(self) -> None:
        try:
            from sklearn.ensemble import RandomForestRegressor
        except ImportError:
            raise ConfigError(
                "the model-guided search (search='model') needs scikit-learn: "
                "pip install 'kernelpick[search]', or pick another search"
            ) from None
        self._forest_class: Any = RandomForestRegressor
        self._grid = Grid(self.candidates, self.space)
        self._features = np.array([self._grid.features(c) for c in self.candidates], dtype=float)
        self._row = {config: row for row, config in enumerate(self.candidates)}
        self._bests: list[float] = []

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        timed = latest(history)
        untimed = [c for c in self.candidates if c not in timed]
        if not untimed:
            return None
        best_so_far = best(list(timed.values()))
        working = sum(e.result.ok for e in timed.values())
        if best_so_far is None or working < self.initial // 2 or not self._grid.dimensions:
            wanted = self.initial if not timed else self.batch_size
            return Batch(tuple(self.random.sample(untimed, min(wanted, len(untimed)))))
        model = _Forest(untimed, *self.fit(timed, untimed))
        limit = math.log(best_so_far.result.cost_ms * self.local_slowdown)
        near = sorted(
            (c for c in self._grid.around(best_so_far.config) if c in model.row and model.mean_of(c) < limit),
            key=model.mean_of,
        )
        if self._stalled(best_so_far) and not near:
            return None
        promising = _alternate(model.fastest_by_tree(self.random), model.by_expected_improvement())
        chosen = list(dict.fromkeys(near[: self.local] + promising))[: max(1, self.batch_size - self.explore)]
        taken = set(chosen)
        rest = [c for c in untimed if c not in taken]
        chosen += self.random.sample(rest, min(self.batch_size - len(chosen), len(rest)))
        return Batch(tuple(chosen))

    def _stalled(self, best_so_far: Evaluation) -> bool:
        """Whether the last `stop_after` batches improved the best by less than `min_gain` in all."""
        self._bests.append(best_so_far.result.cost_ms)
        if len(self._bests) <= self.stop_after:
            return False
        return not self._bests[-1] < self._bests[-1 - self.stop_after] * (1 - self.min_gain)

    def fit(self, timed: dict[Config, Evaluation], untimed: list[Config]) -> tuple[Any, Any]:
        """Fit a forest on log(time) of the timed configs; its trees' predictions of log(time) for
        the untimed ones (trees by configs), and the best log(time) timed."""
        configs = list(timed)
        times = np.array([timed[c].result.cost_ms for c in configs], dtype=float)
        working = np.isfinite(times)
        targets = np.log(np.where(working, times, 1.0))
        targets[~working] = targets[working].max() + math.log(2)
        forest = self._forest_class(n_estimators=self.trees, random_state=self.seed)
        forest.fit(self._features[[self._row[c] for c in configs]], targets)
        rows = self._features[[self._row[c] for c in untimed]]
        return np.stack([tree.predict(rows) for tree in forest.estimators_]), targets[working].min()


class _Forest:
    """One fit's predictions for the untimed candidates, ranked the ways the search asks for."""

    def __init__(self, untimed: list[Config], per_tree: Any, best: float) -> None:
        """`per_tree`: each tree's predicted log(time) of each untimed config (trees by configs);
        `best`: the best log(time) timed (`ModelGuidedSearch.fit`)."""
        self.untimed = untimed
        self.row = {config: i for i, config in enumerate(untimed)}
        self.per_tree, self.best = per_tree, best
        self.mean = per_tree.mean(axis=0)

    def mean_of(self, config: Config) -> float:
        return float(self.mean[self.row[config]])

    def fastest_by_tree(self, draw: random.Random) -> list[Config]:
        """The fastest untimed config by each tree, the trees in a random order."""
        trees = draw.sample(range(len(self.per_tree)), len(self.per_tree))
        return list(dict.fromkeys(self.untimed[int(np.argmin(self.per_tree[tree]))] for tree in trees))

    def by_expected_improvement(self) -> list[Config]:
        """The untimed configs by expected improvement of log(time) over the best, highest first."""
        from scipy.special import ndtr

        spread = self.per_tree.std(axis=0) + 1e-9
        gain = self.best - self.mean
        z = gain / spread
        expected = gain * ndtr(z) + spread * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        return [self.untimed[i] for i in np.argsort(-expected, kind="stable")]


def _alternate(first: list[Config], second: list[Config]) -> list[Config]:
    """One from each list in turn, without repeats, then the rest of the longer."""
    merged = [c for pair in zip(first, second) for c in pair]
    return list(dict.fromkeys(merged + first[len(second) :] + second[len(first) :]))
