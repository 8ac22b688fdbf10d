"""Search traces in the tuning log: which configs a search timed, in order, and when."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelpick.bench.result import TimingSummary

_LISTS = ("evaluations", "trace", "history", "steps")
_TIMES = ("seconds", "seconds_at", "elapsed_s", "elapsed", "time_s")
_COSTS = ("cost_ms", "median_ms", "ms")


@dataclass(frozen=True, slots=True)
class LoggedSearch:
    """One search's timed configs in order, read back from the tuning log: when each was timed (None
    where the trace does not say) and what it cost (infinity for a failure)."""

    strategy: str
    seconds: tuple[float | None, ...]
    costs: tuple[float, ...]
    efforts: tuple[float, ...] = ()  # per evaluation, when the trace says (else all full timings)

    @property
    def timed(self) -> bool:
        """Whether every evaluation says when it happened (else progress is drawn by evaluation count)."""
        return bool(self.seconds) and all(s is not None for s in self.seconds)

    def best_so_far(self) -> list[float]:
        """The best cost after each evaluation (infinity until one works): the lowest among those
        timed at the highest effort reached, as the tuner picks."""
        efforts = self.efforts or (1.0,) * len(self.costs)
        top, best, found = -math.inf, math.inf, []
        for cost, effort in zip(self.costs, efforts):
            if not math.isinf(cost) and (effort > top or (effort == top and cost < best)):
                top, best = effort, cost
            found.append(best)
        return found

    @property
    def best_ms(self) -> float | None:
        best = self.best_so_far()[-1] if self.costs else math.inf
        return None if math.isinf(best) else best

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "evaluations": len(self.costs),
            "best_ms": self.best_ms,
            "seconds": None if not self.timed else self.seconds[-1],
        }


def parse_search(data: Any) -> LoggedSearch | None:
    """The trace in a log line's `search` (None when it has no list of evaluations).

    A tuning record with a `search` attribute logs `search.to_dict()`, read here as
    `{"strategy": "model", "evaluations": [{"seconds": 0.8, "candidate": "...", "cost_ms": 0.012}, ...]}`:
    the strategy's name and one entry per timed config in the order it was timed, `seconds` since the
    tuning began and `cost_ms` (None or absent for a config that failed). Also read: `trace`,
    `history` or `steps` for the list, `seconds_at`/`elapsed_s`/`elapsed` for the time, `median_ms`
    or a nested `result` (a `BenchmarkResult.to_dict()`, as `kernelpick.search` logs) for the cost,
    and `[seconds, cost_ms]` pairs. An entry's `effort` (below 1: a quick, noisy timing) is read as
    the tuner weighs it: once a config is timed at a higher effort, only timings at that effort
    compete for the best (`kernelpick.search.SearchTrace.progress`).

    Args:
        data: the value of a log line's `search`, or one of a selector's `searches`.
    """
    if not isinstance(data, Mapping):
        return None
    steps = next((data[name] for name in _LISTS if isinstance(data.get(name), list)), None)
    if steps is None:
        return None
    seconds: list[float | None] = []
    costs: list[float] = []
    efforts: list[float] = []
    for step in steps:
        effort: Any = 1.0
        if isinstance(step, Mapping):
            when = next((step[name] for name in _TIMES if name in step), None)
            cost = next((step[name] for name in _COSTS if name in step), None)
            if cost is None:  # `kernelpick.search.SearchTrace.to_dict()`: the result nested
                cost = _timed_cost(step.get("result"))
            effort = step.get("effort", 1.0)
        elif isinstance(step, (list, tuple)) and len(step) >= 2:
            when, cost = step[0], step[1]
        else:
            continue
        seconds.append(finite_number(when))
        found = finite_number(cost)
        costs.append(math.inf if found is None or found <= 0 else found)
        efforts.append(finite_number(effort) or 1.0)
    strategy = data.get("strategy") or data.get("name") or "search"
    return LoggedSearch(str(strategy), tuple(seconds), tuple(costs), tuple(efforts))


def _timed_cost(result: Any) -> float | None:
    """A logged `BenchmarkResult`'s cost per call (`TimingSummary.cost_ms`), when it has a timing."""
    timing = result.get("timing") if isinstance(result, Mapping) else None
    if not isinstance(timing, Mapping):
        return None
    try:
        return TimingSummary.from_dict(timing).cost_ms
    except (TypeError, ValueError):  # not a timing kernelpick writes
        return None


def finite_number(value: Any) -> float | None:
    """`value` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
