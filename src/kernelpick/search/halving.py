"""Successive halving (racing): time many configs quickly, keep the clearly faster ones, time them better."""

from __future__ import annotations

import math
from collections.abc import Sequence

from kernelpick.config import Config
from kernelpick.search.base import Batch, Evaluation, SearchStrategy, latest
from kernelpick.search.options import Option


class SuccessiveHalving(SearchStrategy):
    """Rounds of timings at growing effort over a shrinking set of configs.

    The first round times the candidates (all of them, or as many as an evaluation budget leaves
    room for over every round, drawn at random) at a low effort; each round keeps the fastest
    `1 / reduction` of those that worked, and those whose timing cannot be told apart from the
    fastest's (within twice either's spread, up to half of the round), then times them `reduction`
    times as hard; the last round is at full effort. Every candidate is compiled, so the search
    saves timing, not compiling.
    """

    name = "halving"
    reduction = Option(
        3,
        "Each round keeps the fastest 1/reduction of its configs and times them reduction times as hard.",
        minimum=2,
    )
    max_rounds = Option(
        4, "Rounds at most: with a reduction of 3, the first is at 1/27 of a full timing.", minimum=1
    )

    def prepare(self) -> None:
        pool = list(self.candidates)
        self.random.shuffle(pool)
        if self.budget.max_evaluations is not None:
            # The rounds add up to about first * reduction / (reduction - 1) timings.
            room = self.budget.max_evaluations * (self.reduction - 1) // self.reduction
            pool = pool[: max(1, room)]
        rounds = max(1, min(self.max_rounds, int(math.log(len(pool), self.reduction))))
        self._round, self._rounds_left = tuple(pool), rounds - 1
        self._started = False

    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        if not self._started:
            self._started = True
            return Batch(self._round, self._effort())
        if self._rounds_left == 0:
            return None
        keep = self._survivors(history)
        if not keep:
            return None
        self._round, self._rounds_left = keep, self._rounds_left - 1
        return Batch(keep, self._effort())

    def _effort(self) -> float:
        return float(self.reduction) ** -self._rounds_left

    def _survivors(self, history: Sequence[Evaluation]) -> tuple[Config, ...]:
        timed = latest(history)
        working = sorted(
            (timed[c] for c in self._round if c in timed and timed[c].result.ok),
            key=lambda e: e.result.cost_ms,
        )
        if not working:
            return ()
        count = math.ceil(len(working) / self.reduction)
        fastest = working[0].result
        assert fastest.timing is not None
        reach = fastest.cost_ms * (1 + 2 * fastest.timing.spread)
        close = [
            e
            for e in working[count:]
            if e.result.timing is not None and e.result.cost_ms * (1 - 2 * e.result.timing.spread) <= reach
        ]
        kept = working[:count] + close[: max(0, math.ceil(len(working) / 2) - count)]
        return tuple(e.config for e in kept)
