"""Pattern search: from good configs, try their neighbours along each dimension and move to the better."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernelpick.config import Config
from kernelpick.search.base import Batch, Evaluation, SearchStrategy, latest
from kernelpick.search.grid import Grid
from kernelpick.search.options import Option


@dataclass(slots=True)
class _Walker:
    """One compass search: where it starts, its centre and step, and the poll it last asked for."""

    starting: tuple[Config, ...]
    step: int = 0
    centre: Config | None = None
    polled: tuple[Config, int] | None = None


class PatternSearch(SearchStrategy):
    """Compass search over the typed dimensions, `walkers` at once, with random restarts.

    Each walker times `starts` random candidates and takes the fastest as its centre; then it times
    the centre's neighbours `first_step` positions away along each dimension (BLOCK_M 64 -> 16 and
    256, num_warps 4 -> 2 and 8 ...), moves to the fastest if it beats the centre, and otherwise
    halves the step; when a step of one finds nothing better the centre is a local optimum and the
    walker starts again from new random candidates, `restarts` starts in all at most. A batch holds
    every walker's next poll, so the compilers work on all of them at once (one walker's poll, a
    dozen configs, would leave most of them idle). A walker that comes to the centre another is
    polling from stops there.
    Neighbours that are not candidates (left out by a constraint or the device) are skipped.
    """

    name = "pattern"
    walkers = Option(4, "Compass searches at once, their polls timed together in one batch.", minimum=1)
    starts = Option(4, "Random candidates a walker times to take the fastest as its first centre.", minimum=1)
    restarts = Option(8, "Walkers started again from new random candidates, in all, at most.", minimum=0)
    first_step = Option(2, "Positions along a dimension of a walker's first poll (then halved).", minimum=1)

    def prepare(self) -> None:
        self._grid = Grid(self.candidates, self.space)
        self._walkers: list[_Walker] = []
        self._started = 0

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        timed = latest(history)
        wanted: dict[Config, None] = {}
        centres: set[Config] = set()
        for walker in self._walkers:
            todo = self._advance(walker, timed, centres)
            wanted.update(dict.fromkeys(todo))
        self._walkers = [w for w in self._walkers if w.centre is not None or w.starting]
        while len(self._walkers) < self.walkers and self._started <= self.restarts:
            fresh = [c for c in self.candidates if c not in timed and c not in wanted]
            if not fresh:
                break
            self._started += 1
            starting = tuple(self.random.sample(fresh, min(self.starts, len(fresh))))
            self._walkers.append(_Walker(starting))
            wanted.update(dict.fromkeys(starting))
        return Batch(tuple(wanted)) if wanted else None

    def _advance(
        self, walker: _Walker, timed: dict[Config, Evaluation], centres: set[Config]
    ) -> list[Config]:
        """Move `walker` as far as the timings allow; the configs it needs timed next, none once it
        is done (its centre None: at a local optimum, or where another walker polls)."""
        while True:
            if walker.starting:
                walker.centre = _fastest(walker.starting, timed)
                walker.starting, walker.step = (), self.first_step
            if walker.centre is None or walker.centre in centres:
                walker.centre = None
                return []
            poll = self._grid.neighbours(walker.centre, walker.step)
            todo = [c for c in poll if c not in timed]
            if todo and walker.polled != (walker.centre, walker.step):
                walker.polled = (walker.centre, walker.step)
                centres.add(walker.centre)
                return todo
            better = _fastest(poll, timed)
            if better is not None and _cost(timed[better]) < _cost(timed[walker.centre]):
                walker.centre = better
            elif walker.step > 1:
                walker.step //= 2
            else:
                walker.centre = None


def _cost(evaluation: Evaluation) -> float:
    return evaluation.result.cost_ms


def _fastest(configs: Sequence[Config], timed: dict[Config, Evaluation]) -> Config | None:
    working = [c for c in configs if c in timed and timed[c].result.ok]
    return min(working, key=lambda c: _cost(timed[c])) if working else None
