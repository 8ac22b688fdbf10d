"""Random search: the candidates in a seeded random order, a batch at a time."""

from __future__ import annotations

from collections.abc import Sequence

from kernelpick.search.base import Batch, Evaluation, SearchStrategy
from kernelpick.search.options import Option


class RandomSearch(SearchStrategy):
    """Times the candidates in a random order, `batch_size` at a time, until all are timed or the
    budget ends: the baseline any cleverer strategy must beat."""

    name = "random"
    batch_size = Option(16, "Configs timed per batch.", minimum=1)

    def prepare(self) -> None:
        self._order = list(self.candidates)
        self.random.shuffle(self._order)

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        timed = {e.config for e in history}
        todo = tuple(c for c in self._order if c not in timed)[: self.batch_size]
        return Batch(todo) if todo else None
