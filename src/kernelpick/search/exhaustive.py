"""Exhaustive search: every candidate, in one batch."""

from __future__ import annotations

from collections.abc import Sequence

from kernelpick.search.base import Batch, Evaluation, SearchStrategy
from kernelpick.search.options import Option


class ExhaustiveSearch(SearchStrategy):
    """Times every candidate not timed yet, all in one batch (so they all compile in parallel).

    Under a budget of seconds it goes in batches of `batch_size` instead, in the candidates' order,
    so that the budget can stop it.
    """

    name = "exhaustive"
    batch_size = Option(
        64, "Configs per batch under a budget of seconds (without one: every config in one batch).", minimum=1
    )

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        timed = {e.config for e in history}
        todo = tuple(c for c in self.candidates if c not in timed)
        if self.budget.max_seconds is not None:
            todo = todo[: self.batch_size]
        return Batch(todo) if todo else None
