"""Pattern search: from a good config, try its neighbours along each dimension and move to the better."""

from __future__ import annotations

from collections.abc import Sequence

from kernelpick.tune.config import Config
from kernelpick.tune.search.base import Batch, Evaluation, SearchStrategy, latest
from kernelpick.tune.search.grid import Grid


class PatternSearch(SearchStrategy):
    """Compass search over the typed dimensions, with random restarts.

    It times `starts` random candidates and takes the fastest as the centre; then it times the
    centre's neighbours `first_step` positions away along each dimension (BLOCK_M 64 -> 16 and 256,
    num_warps 4 -> 2 and 8 ...), moves to the fastest if it beats the centre, and otherwise halves
    the step; when a step of one finds nothing better the centre is a local optimum and the search
    restarts from new random candidates, `restarts` times at most. Neighbours that are not
    candidates (left out by a constraint or the device) are skipped.
    """

    name = "pattern"
    starts = 4
    restarts = 8
    first_step = 2
    _starting: tuple[Config, ...] = ()
    _started = 0
    _centre: Config | None = None
    _step = 0
    _polled: tuple[Config, int] | None = None

    def prepare(self) -> None:
        self._grid = Grid(self.candidates, self.space)

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        timed = latest(history)
        while True:
            if self._centre is None:
                self._centre = _fastest(self._starting, timed)
                self._starting, self._step = (), self.first_step
                if self._centre is None:
                    return self._restart(timed)
            poll = self._grid.neighbours(self._centre, self._step)
            todo = tuple(c for c in poll if c not in timed)
            if todo and self._polled != (self._centre, self._step):
                self._polled = (self._centre, self._step)
                return Batch(todo)
            better = _fastest(poll, timed)
            if better is not None and _cost(timed[better]) < _cost(timed[self._centre]):
                self._centre = better
            elif self._step > 1:
                self._step //= 2
            else:
                self._centre = None

    def _restart(self, timed: dict[Config, Evaluation]) -> Batch | None:
        fresh = [c for c in self.candidates if c not in timed]
        if self._started > self.restarts or not fresh:
            return None
        self._started += 1
        self._starting = tuple(self.random.sample(fresh, min(self.starts, len(fresh))))
        return Batch(self._starting)


def _cost(evaluation: Evaluation) -> float:
    return evaluation.result.cost_ms


def _fastest(configs: Sequence[Config], timed: dict[Config, Evaluation]) -> Config | None:
    working = [c for c in configs if c in timed and timed[c].result.ok]
    return min(working, key=lambda c: _cost(timed[c])) if working else None
