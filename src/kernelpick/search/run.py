"""Running a search: a strategy proposes, the caller's `measure` times, a budget says when to stop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.base import Budget, Evaluation, SearchStrategy, latest
from kernelpick.search.base import best as fastest

log = logging.getLogger("kernelpick.tune.search")

#: Times `configs` at `effort` (0 < effort <= 1 of a full timing) and returns a result for each.
Measure = Callable[[Sequence[Config], float], Mapping[Config, BenchmarkResult]]
#: Why a search stopped: the strategy was done, a budget ran out, or it proposed only timed configs.
Stop = Literal["done", "evaluations", "seconds", "stalled"]

#: Proposals in a row with nothing new to time after which a search is stopped as stalled.
STALLED_AFTER = 3


@dataclass(frozen=True, slots=True)
class SearchTrace:
    """What a search did: every evaluation in order (results given as known first, at second 0),
    how many it timed itself, how long it took and why it stopped."""

    strategy: str
    evaluations: tuple[Evaluation, ...]
    used: int  # evaluations timed by this search (not given as known)
    seconds: float
    stopped: Stop
    candidates: int = 0  # how many configs the search could choose from

    @property
    def best(self) -> Evaluation | None:
        """The evaluation a tuning would pick: the fastest working one at the highest effort reached."""
        return fastest(self.evaluations)

    def results(self) -> dict[Config, BenchmarkResult]:
        """Each config's result at the highest effort it was timed at."""
        return {config: e.result for config, e in latest(self.evaluations).items()}

    def progress(self) -> list[tuple[float, Evaluation]]:
        """Each time the best so far changed: when (seconds since the start) and the new best.

        Quick, noisy timings do not outrank full ones: once a config is timed at a higher effort,
        only evaluations at that effort compete.
        """
        changes: list[tuple[float, Evaluation]] = []
        top: Evaluation | None = None
        for evaluation in self.evaluations:
            if not evaluation.result.ok:
                continue
            if (
                top is None
                or evaluation.effort > top.effort
                or (evaluation.effort == top.effort and evaluation.result.cost_ms < top.result.cost_ms)
            ):
                top = evaluation
                if changes and changes[-1][0] == evaluation.seconds_at:
                    changes.pop()  # one change per batch: its best
                changes.append((evaluation.seconds_at, evaluation))
        return changes

    def curve(self) -> list[tuple[float, float]]:
        """The best-so-far curve: (seconds since the start, best time in ms) at each change."""
        return [(seconds, e.result.cost_ms) for seconds, e in self.progress()]

    def summary(self, space: str = "") -> str:
        """One line for the AUTOTUNE table: the strategy, how much of the space (named, when given)
        it evaluated, why it stopped."""
        evaluated = len(latest(self.evaluations))
        return (
            f"{self.strategy} search{' of ' + space if space else ''}: {evaluated} of {self.candidates} "
            f"configs evaluated "
            f"({self.used} timed now, {self.seconds:.1f} s; stopped: {self.stopped})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for the tuning log and reports."""
        found = self.best
        return {
            "strategy": self.strategy,
            "candidates": self.candidates,
            "seconds": self.seconds,
            "stopped": self.stopped,
            "used": self.used,
            "best": None if found is None else found.config.digest,
            "curve": [list(point) for point in self.curve()],
            "evaluations": [
                {
                    "config": e.config.to_data(),
                    "digest": e.config.digest,
                    "result": e.result.to_dict(),
                    "seconds_at": e.seconds_at,
                    "effort": e.effort,
                }
                for e in self.evaluations
            ],
        }


def run_search(
    strategy: SearchStrategy,
    measure: Measure,
    budget: Budget | None = None,
    clock: Callable[[], float] = time.perf_counter,
    *,
    known: Mapping[Config, BenchmarkResult] | None = None,
) -> SearchTrace:
    """Ask `strategy` for batches and time them with `measure` until it is done or `budget` is spent.

    A config already timed at an effort is not timed again at that effort or a lower one; the last
    batch is cut to the evaluations left.

    Args:
        strategy: proposes what to time.
        measure: times a batch: the caller's benchmarker, or `ReplayBenchmarker.measure`.
        budget: timings and seconds the search may spend (default: the strategy's own budget).
        clock: seconds, read at the start and after each batch (`ReplayBenchmarker.clock` for a
            simulated one).
        known: results already had (from the store) for candidates; the strategy sees them as
            full timings at second 0 and they cost nothing.

    Raises:
        ConfigError: `measure` returned no result for a config it was given.
    """
    budget = budget or strategy.budget
    start = clock()
    history = [Evaluation(config, result, 0.0) for config, result in (known or {}).items()]
    timed = {e.config: e.effort for e in history}
    used, idle = 0, 0
    stopped: Stop = "done"
    while True:
        if budget.max_seconds is not None and clock() - start >= budget.max_seconds:
            stopped = "seconds"
            break
        left = None if budget.max_evaluations is None else budget.max_evaluations - used
        if left is not None and left <= 0:
            stopped = "evaluations"
            break
        batch = strategy.propose(tuple(history))
        if batch is None:
            break
        todo = [c for c in dict.fromkeys(batch.configs) if timed.get(c, 0.0) < batch.effort][:left]
        if not todo:
            idle += 1
            if idle >= STALLED_AFTER:
                log.warning(
                    "the %s search proposed only timed configs %d times: stopped", strategy.name, idle
                )
                stopped = "stalled"
                break
            continue
        idle = 0
        results = measure(todo, batch.effort)
        missing = [c for c in todo if c not in results]
        if missing:
            raise ConfigError(
                f"measure returned no result for {len(missing)} of {len(todo)} configs (first: {missing[0]}): "
                "it must return a BenchmarkResult for every config it is given"
            )
        at = clock() - start
        history += [Evaluation(c, results[c], at, batch.effort) for c in todo]
        timed.update((c, batch.effort) for c in todo)
        used += len(todo)
    trace = SearchTrace(
        strategy.name, tuple(history), used, clock() - start, stopped, len(strategy.candidates)
    )
    log.debug("%s search: %d timings in %.1f s, %s", strategy.name, used, trace.seconds, stopped)
    return trace
