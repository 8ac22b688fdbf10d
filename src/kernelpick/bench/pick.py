"""The pick: the fastest candidate, unless it does not clearly beat the reference."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from kernelpick.bench.result import BenchmarkResult

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Pick(Generic[K]):
    """What runs (`best`), the lowest-cost candidate (`fastest`), and why, in one sentence (`note`;
    empty when the fastest simply won)."""

    best: K
    fastest: K
    note: str


def pick(
    results: Mapping[K, BenchmarkResult],
    reference: K | None = None,
    *,
    name: Callable[[K], str] = str,
    measure: str = "graph",
) -> Pick[K]:
    """The candidate to run.

    Args:
        results: every candidate's result; at least one must be ok.
        reference: the candidate to keep unless another clearly beats it (None: the fastest wins).
        name: how a candidate is named in the note.
        measure: what a call costs: "graph", its device time; "eager", the larger of its device and
            host time (`TimingSummary.cost`).

    Raises:
        ValueError: no candidate is ok.
    """
    ok = [k for k, r in results.items() if r.ok]
    if not ok:
        raise ValueError("no candidate worked")
    fastest = min(ok, key=lambda k: results[k].cost(measure))
    if reference is None or reference == fastest or reference not in results or not results[reference].ok:
        return Pick(fastest, fastest, "")
    ours, theirs = results[fastest], results[reference]
    gain = 1.0 - ours.cost(measure) / theirs.cost(measure)
    # How much faster the fastest must be, as a fraction of the reference's cost: the larger of the
    # two measured spreads (half the interquartile range over the median).
    needed = max((r.timing.spread for r in (ours, theirs) if r.timing is not None), default=0.0)
    if gain > needed:
        return Pick(fastest, fastest, "")
    note = (
        f"kept the reference {name(reference)}: {name(fastest)} was {100 * gain:.1f} % faster, "
        f"within the measured spread of {100 * needed:.1f} %"
    )
    return Pick(reference, fastest, note)
