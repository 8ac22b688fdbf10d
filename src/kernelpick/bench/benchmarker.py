"""Benchmark candidates in two rounds: all of them briefly, then the fastest few again, interleaved."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kernelpick import settings
from kernelpick.bench.device import DeviceInfo
from kernelpick.bench.result import BenchmarkResult, Status
from kernelpick.bench.stats import TimingSummary
from kernelpick.bench.timers import Benchmarkable, Timer, TimingBudget

log = logging.getLogger("kernelpick.bench")
_K = TypeVar("_K")


def classify_run_error(error: BaseException) -> tuple[Status, str]:
    """Map an exception raised while running a candidate to a status and message."""
    name = type(error).__name__
    status: Status = "out_of_resources" if name == "OutOfResources" else "runtime_error"
    text = str(error).strip()
    if len(text) > 2000:
        text = text[:1000] + "\n...\n" + text[-1000:]
    return status, f"{name}: {text}" if text else name


def benchmark(
    candidates: Sequence[Benchmarkable],
    timer: Timer,
    *,
    screening: TimingBudget | None,
    confirming: TimingBudget | None = None,
    confirm_top: int = 0,
    confirm_within: float = 0.1,
    cutoff: float | None = None,
    best_ms: float = float("inf"),
    on_done: Callable[[], object] | None = None,
) -> list[BenchmarkResult]:
    """Time every candidate; a candidate that raises is recorded with its reason, never chosen.

    Args:
        candidates: what to time; each is set up and torn down around every run, outside the timing.
        timer: how to time.
        screening: the budget of the first round, for every candidate (None: no first round; every
            candidate is timed in the second round, which then needs `confirming`).
        confirming: the budget of the second round, for the `confirm_top` fastest (None: no second round).
        confirm_top: at most how many of the fastest to time again, interleaved and longer, so that the
            pick between near-equal candidates rests on more than a brief first look (0 or 1: no second round).
        confirm_within: only candidates that ran within this fraction of the best median in the
            first round are timed again (see `finalists`).
        cutoff: in the first round, a candidate whose first runs are slower than the best so far by
            more than this fraction is timed no further (None: every candidate gets its full budget).
        best_ms: the fastest median known before this call (measured elsewhere: another worker), for
            the cutoff.
        on_done: called after each candidate of the first round (for progress bars).

    Returns:
        One result per candidate, in order.
    """
    if screening is None:
        if confirming is None:
            raise ValueError("benchmark() needs a screening budget, a confirming budget, or both")
        return _confirmed(candidates, timer, confirming, range(len(candidates)), {})
    results: list[BenchmarkResult] = []
    best = best_ms
    for candidate in candidates:
        limit = None if cutoff is None or best == float("inf") else best * (1.0 + cutoff)
        try:
            summary = TimingSummary.of(timer.measure(candidate, screening, limit))
            results.append(BenchmarkResult("ok", summary))
            best = min(best, summary.median_ms)
        except Exception as error:  # failures are data
            status, message = classify_run_error(error)
            log.debug("candidate %s failed: %s", candidate.name, message)
            results.append(BenchmarkResult.failed(status, message))
        if on_done is not None:
            on_done()
    fastest = finalists(dict(enumerate(results)), confirm_top, confirm_within)
    if confirming is not None and len(fastest) >= 2:
        return _confirmed(candidates, timer, confirming, fastest, dict(enumerate(results)))
    return results


def _confirmed(
    candidates: Sequence[Benchmarkable],
    timer: Timer,
    budget: TimingBudget,
    chosen: Sequence[int],
    first: dict[int, BenchmarkResult],
) -> list[BenchmarkResult]:
    """`first` with the `chosen` candidates timed again together, interleaved.

    If that round fails, the first round's figures stand; without a first round, every chosen
    candidate gets the failure as its result.
    """
    try:
        samples = timer.measure_interleaved([candidates[i] for i in chosen], budget)
    except Exception as error:
        if len(first) == len(candidates):
            log.warning("second benchmark round failed, keeping the first round's timings: %s", error)
            return [first[i] for i in range(len(candidates))]
        status, message = classify_run_error(error)
        return [first.get(i) or BenchmarkResult.failed(status, message) for i in range(len(candidates))]
    confirmed = {index: BenchmarkResult("ok", TimingSummary.of(runs)) for index, runs in zip(chosen, samples)}
    return (
        [r for _, r in sorted(on_one_scale(first, confirmed).items())]
        if first
        else [confirmed[i] for i in chosen]
    )


def finalists(results: Mapping[_K, BenchmarkResult], top: int, within: float) -> list[_K]:
    """The candidates worth a second round: at most `top`, fastest median first, each of which ran
    at least once within `within` of the best median.

    A screen is brief, and on a GPU a few slow runs can lift a candidate's median by 10 % (an H200
    screened Triton GEMMs at 0.082 ms whose fastest runs took 0.071 ms, against cuBLAS at 0.074 ms).
    Admitting by the fastest run keeps such a candidate in the final, where longer interleaved runs
    settle it; the median still orders the final and decides the winner.
    """
    ranked = sorted((k for k, r in results.items() if r.ok), key=lambda k: results[k].median_ms)
    if not ranked:
        return []
    limit = results[ranked[0]].median_ms * (1.0 + within)
    return [k for k in ranked if (timing := results[k].timing) is not None and timing.min_ms <= limit][:top]


def on_one_scale(
    first: Mapping[_K, BenchmarkResult], second: Mapping[_K, BenchmarkResult]
) -> dict[_K, BenchmarkResult]:
    """`first` with the `second` round's results in, and every other first-round figure multiplied
    by the finalists' median ratio of second to first round.

    The second round runs the finalists back to back for longer, and a GPU at its power limit
    clocks down: its figures run a few percent above the first round's. Compared as they are, a
    candidate left out of the second round would beat the finalists on that offset alone. Rescaled,
    it ranks against them as it did in the first round; and the winner is always a finalist.
    """
    ratios = [
        r.median_ms / first[k].median_ms for k, r in second.items() if r.ok and k in first and first[k].ok
    ]
    factor = statistics.median(ratios) if ratios else 1.0
    merged = dict(first)
    for key, result in first.items():
        if key not in second and result.timing is not None:
            merged[key] = BenchmarkResult("ok", result.timing.scaled(factor))
    merged.update(second)
    return merged


def budgets_for(device: DeviceInfo, interpreted: TimingBudget) -> dict[str, Any]:
    """The keyword arguments of `benchmark()` for a device, from the settings: on GPUs, a first round
    with a cutoff and a second, interleaved round for the closest few; elsewhere one round of
    `interpreted` (Triton's interpreter and CPU functions: timings that rank, never predict)."""
    if device.interpreter:
        return {"screening": interpreted}
    current = settings.current()
    return {
        "screening": TimingBudget.screening(),
        "confirming": TimingBudget.confirming(),
        "confirm_top": current.confirm_top,
        "confirm_within": current.confirm_within,
        "cutoff": current.screen_cutoff,
    }
