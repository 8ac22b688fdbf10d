"""Benchmark candidates in two rounds: all of them briefly, then the fastest few again, interleaved."""

from __future__ import annotations

import dataclasses
import functools
import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import torch

from kernelpick import settings
from kernelpick.bench.host import host_ms
from kernelpick.bench.result import BenchmarkResult, Status, TimingSummary
from kernelpick.bench.timers import Benchmarkable, Timer, TimingBudget
from kernelpick.compile.precompile import shortened
from kernelpick.device import DeviceInfo
from kernelpick.signals import raise_if_interrupted

log = logging.getLogger("kernelpick.bench")
_K = TypeVar("_K")

#: Part of every store key: bump when the way candidates are measured, or what a key holds, changes,
#: so that results measured the old way are measured again rather than compared with new ones.
MEASUREMENT_VERSION = "measure-3"


def classify_run_error(error: BaseException) -> tuple[Status, str]:
    """Map an exception raised while running a candidate to a status and message.

    Raises:
        KeyboardInterrupt: Ctrl-C arrived while it ran: the exception is the interruption (which
            stops the tuning), however the code it landed in turned it, never the candidate's failure.
    """
    raise_if_interrupted(error)
    name = type(error).__name__
    status: Status = "out_of_resources" if name == "OutOfResources" else "runtime_error"
    text = shortened(str(error).strip())
    return status, f"{name}: {text}" if text else name


def benchmark(
    candidates: Mapping[_K, Benchmarkable],
    timer: Timer,
    *,
    screening: TimingBudget | None,
    confirming: TimingBudget | None = None,
    confirm_top: int = 0,
    confirm_within: float = 0.1,
    cutoff: float | None = None,
    best_ms: float | Callable[[], float] = float("inf"),
    on_done: Callable[[_K, BenchmarkResult], object] | None = None,
    host_time: Callable[[Benchmarkable, float], float] | None = None,
    reference: _K | None = None,
) -> dict[_K, BenchmarkResult]:
    """Time every candidate; a candidate that raises is recorded with its reason, never chosen.

    Args:
        candidates: what to time, by key (a digest).
        timer: how to time.
        screening: the budget of the first round, for every candidate (None: no first round; every
            candidate is timed in the second round, which then needs `confirming`).
        confirming: the budget of the second round, for the `confirm_top` fastest (None: no second round).
        confirm_top: at most how many of the fastest to time again, interleaved and longer (0 or 1: no
            second round).
        confirm_within: only candidates that ran within this fraction of the best median in the
            first round are timed again (see `finalists`).
        cutoff: in the first round, a candidate whose first runs are slower than the best so far by
            more than this fraction is timed no further (None: every candidate gets its full budget).
        best_ms: the lowest cost measured elsewhere (another worker, or other ranks: then a function,
            asked before each candidate), which the cutoff and the `finalists` count too.
        on_done: called with each candidate's key and first-round result as it is done with.
        host_time: a candidate's host time per call, given its device time (`bench/host.py`; None:
            device time alone is its cost, as for the configs of one kernel, which share one launcher).
        reference: the key of the candidate to keep unless clearly beaten (`bench.pick`): always timed
            again in the second round.

    Returns:
        One result per candidate, by key, in the candidates' order.
    """
    if screening is None:
        if confirming is None:
            raise ValueError("benchmark() needs a screening budget, a confirming budget, or both")
        try:
            timed = _interleaved(candidates, timer, confirming, list(candidates))
            return {key: BenchmarkResult("ok", timing) for key, timing in timed.items()}
        except Exception as error:  # without a first round, each candidate gets the failure
            return dict.fromkeys(candidates, BenchmarkResult.failed(*classify_run_error(error)))
    results: dict[_K, BenchmarkResult] = {}
    elsewhere = best_ms if callable(best_ms) else lambda: best_ms
    best = float("inf")  # kept as results come: `lowest_cost` of them all is O(n) per candidate
    for key, candidate in candidates.items():
        lowest = min(best, elsewhere())
        limit = None if cutoff is None or lowest == float("inf") else lowest * (1.0 + cutoff)
        try:
            summary = TimingSummary.of(
                timer.measure(candidate, screening, limit), timer_used(timer, candidate)
            )
            if host_time is not None:
                summary = summary.with_host(host_time(candidate, summary.median_ms))
            results[key] = BenchmarkResult("ok", summary)
            best = min(best, summary.cost_ms)
        except Exception as error:  # failures are data
            status, message = classify_run_error(error)
            log.debug("candidate %s failed: %s", candidate.name, message)
            results[key] = BenchmarkResult.failed(status, message)
        if on_done is not None:
            on_done(key, results[key])

    def confirm(chosen: list[_K]) -> dict[_K, TimingSummary]:
        try:
            return _interleaved(candidates, timer, cast(TimingBudget, confirming), chosen)
        except Exception as error:
            log.warning("second benchmark round failed, keeping the first round's timings: %s", error)
            return {}

    top = confirm_top if confirming is not None else 0
    return confirmed(results, confirm, top, confirm_within, reference, elsewhere())


def confirmed(
    first: dict[_K, BenchmarkResult],
    confirm: Callable[[list[_K]], dict[_K, TimingSummary]],
    top: int,
    within: float,
    reference: _K | None,
    best_ms: float,
) -> dict[_K, BenchmarkResult]:
    """The second round, here (`benchmark`) or in workers (`WorkerPool.measure`): `first` with its
    `finalists`, if two or more, timed again by `confirm` (which returns nothing where it failed), and
    every other figure multiplied by the finalists' median ratio of second to first round. A finalist
    keeps its first round's host time: the host's share does not change between rounds.

    The second round runs the finalists back to back for longer, and a GPU at its power limit
    clocks down: its figures run above the first round's. Compared as they are, a candidate left
    out of the second round would beat the finalists on that offset alone. Rescaled, it ranks
    against them as it did in the first round; and the pick is always a finalist.
    """
    chosen = finalists(first, top, within, reference, best_ms)
    second = confirm(chosen) if len(chosen) >= 2 else {}
    if not second:
        return first
    factor = statistics.median(t.median_ms / first[k].median_ms for k, t in second.items())
    merged = dict(first)
    for key, result in first.items():
        if result.timing is not None:
            again = second.get(key)
            timing = result.timing.scaled(factor) if again is None else again.with_host(result.timing.host_ms)
            merged[key] = BenchmarkResult("ok", timing)
    return merged


def _interleaved(
    candidates: Mapping[_K, Benchmarkable], timer: Timer, budget: TimingBudget, chosen: Sequence[_K]
) -> dict[_K, TimingSummary]:
    samples = timer.measure_interleaved([candidates[key] for key in chosen], budget)
    return {
        key: TimingSummary.of(runs, timer_used(timer, candidates[key])) for key, runs in zip(chosen, samples)
    }


def lowest_cost(results: Mapping[Any, BenchmarkResult], elsewhere: float = float("inf")) -> float:
    """The lowest cost of `results` that worked, or `elsewhere` (another worker's, rank's) if lower."""
    return min([elsewhere, *(r.cost_ms for r in results.values() if r.ok)])


def finalists(
    results: Mapping[_K, BenchmarkResult],
    top: int,
    within: float,
    reference: _K | None = None,
    best_ms: float = float("inf"),
) -> list[_K]:
    """The candidates worth a second round: at most `top`, lowest cost first, each of which ran at
    least once within `within` of the lowest cost (theirs, or `best_ms` of another rank where lower);
    and `reference` whenever it worked (in the place of the last of the `top`): it runs unless
    clearly beaten, so that comparison rests on the longer round, however the first one read it.

    A screen is brief, and on a GPU a few slow runs can lift a candidate's median above one it
    beats. Admitting by the fastest run keeps such a candidate in the final, where longer
    interleaved runs settle it; the cost still orders the final and decides the pick.
    """
    ranked = sorted((k for k, r in results.items() if r.ok), key=lambda k: results[k].cost_ms)
    limit = lowest_cost(results, best_ms) * (1.0 + within)
    chosen = [k for k in ranked if (timing := results[k].timing) is not None and timing.min_ms <= limit][:top]
    if reference is not None and reference in ranked and reference not in chosen:
        chosen = [*chosen[: top - 1], reference] if len(chosen) >= top else [*chosen, reference]
    return chosen


def budgets_for(device: DeviceInfo, *, per_call: bool = False) -> dict[str, Any]:
    """The keyword arguments of `benchmark()` for a device, from the settings.

    On GPUs: a first round with a cutoff and a second, interleaved round for the closest few; with
    `per_call` (selection: the choices reach the device through different host code), the host time
    per call too. On CPUs, where timings rank and never predict, one round: two runs of an autotuned
    config (interpreted kernels are slow); for selection at least two, as many as `KERNELPICK_REP_MS`
    allows.
    """
    current = settings.current()
    screening = TimingBudget(current.warmup_ms, current.rep_ms, current.min_reps, current.max_reps)
    if device.interpreter:
        if per_call:
            return {"screening": dataclasses.replace(screening, min_reps=min(2, current.min_reps))}
        return {"screening": TimingBudget(0.0, 0.0, 2, 2)}
    budgets: dict[str, Any] = {
        "screening": screening,
        # The second round does not warm up again, and times at least 10 runs of each finalist.
        "confirming": TimingBudget(0.0, current.confirm_rep_ms, max(current.min_reps, 10), current.max_reps),
        "confirm_top": current.confirm_top,
        "confirm_within": current.confirm_within,
        "cutoff": current.screen_cutoff,
    }
    if per_call:
        synchronize = functools.partial(torch.cuda.synchronize, device.index)
        budgets["host_time"] = lambda candidate, device_ms: host_ms(candidate.run, synchronize, device_ms)
    return budgets


def timer_used(timer: Timer, candidate: Benchmarkable) -> str:
    """The name of the timer that timed `candidate`: "events" where it fell back to them (`fell_back`);
    a nameless timer of the user's, its class's."""
    if candidate.name in getattr(timer, "fell_back", ()):
        return "events"
    return str(getattr(timer, "name", type(timer).__name__))
