"""The pick: the fastest candidate, unless it does not clearly beat the reference.

A reference is what the user would run without kernelpick: a selector's first library choice
(cuBLAS through `torch.mm`, say), an autotuned kernel's default config, or the config that won last
time (the stored incumbent). A candidate replaces it only when it is faster by more than the
measured spread of the two: a win inside the noise is no win, and picking it could make the
program slower than doing nothing. The pick says which rule decided, for the AUTOTUNE table.

A call costs its device time or its host time, the larger (`TimingSummary.cost_ms`). Host times are
measured less finely than device times, so costs the host decides that differ by less than
HOST_NOISE are a tie, and the device time breaks it: the call that finishes first on the device is
the one that wins whenever the host runs ahead (CUDA graphs, a busy stream), and costs no more
when it does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from kernelpick.bench.result import BenchmarkResult

K = TypeVar("K")

#: How finely one call's host time is known: in one selection on an H100 the same Triton launcher read
#: 14.6-15.6 µs a call for 16 configs (7 %), and ranking by those figures picked an fp8 GEMM 24 %
#: slower on the device than torch._scaled_mm, whose host time read 2.6 % more
#: (1x4096x4096 in bench/results/scaled_mm_suite-h100-before-host-tie.json).
HOST_NOISE = 0.1


@dataclass(frozen=True, slots=True)
class Pick(Generic[K]):
    """What runs (`best`), the lowest-cost candidate (`fastest`), the reference if any, and why,
    in one sentence (`note`; empty when the fastest simply won)."""

    best: K
    fastest: K
    reference: K | None
    note: str

    @property
    def kept_reference(self) -> bool:
        return self.best != self.fastest


def margin(result: BenchmarkResult, reference: BenchmarkResult) -> float:
    """How much faster `result` must be than `reference`, as a fraction of the reference's cost: the
    larger of the two measured spreads (half the interquartile range over the median)."""
    spreads = [r.timing.spread for r in (result, reference) if r.timing is not None]
    return max(spreads, default=0.0)


def host_tie(a: BenchmarkResult, b: BenchmarkResult) -> bool:
    """Whether `a` and `b` cost the same within HOST_NOISE where the host time decides either cost."""
    if a.timing is None or b.timing is None:
        return False
    host_decides = any((t.host_ms or 0.0) > t.median_ms for t in (a.timing, b.timing))
    low, high = sorted((a.cost_ms, b.cost_ms))
    return host_decides and high <= low * (1.0 + HOST_NOISE)


def lowest_cost(results: Mapping[K, BenchmarkResult], candidates: list[K]) -> K:
    """The candidate of lowest cost, a tie on the host (`host_tie`) going to the fastest on the device."""
    cheapest = min(candidates, key=lambda k: results[k].cost_ms)
    tied = [k for k in candidates if host_tie(results[k], results[cheapest])]
    return min([cheapest, *tied], key=lambda k: (results[k].median_ms, results[k].cost_ms))


def pick(
    results: Mapping[K, BenchmarkResult],
    reference: K | None = None,
    *,
    name: Callable[[K], str] = str,
    eligible: Callable[[K], bool] | None = None,
) -> Pick[K]:
    """The candidate to run.

    Args:
        results: every candidate's result; at least one must be ok.
        reference: the candidate to keep unless another clearly beats it (None: the fastest wins).
        name: how a candidate is named in the note.
        eligible: which candidates may win (default: every one that is ok).

    Raises:
        ValueError: no candidate is ok.
    """
    ok = [k for k, r in results.items() if r.ok and (eligible is None or eligible(k))]
    if not ok:
        raise ValueError("no candidate worked")
    fastest = lowest_cost(results, ok)
    if reference is None or reference == fastest or reference not in results or not results[reference].ok:
        return Pick(fastest, fastest, reference, "")
    ours, theirs = results[fastest], results[reference]
    if host_tie(ours, theirs):  # the same cost as far as the host can tell: the device decides
        gain = 1.0 - ours.median_ms / theirs.median_ms
    else:
        gain = 1.0 - ours.cost_ms / theirs.cost_ms
    needed = margin(ours, theirs)
    if gain > needed:
        return Pick(fastest, fastest, reference, "")
    note = (
        f"kept the reference {name(reference)}: {name(fastest)} was {100 * gain:.1f} % faster, "
        f"within the measured spread of {100 * needed:.1f} %"
    )
    return Pick(reference, fastest, reference, note)
