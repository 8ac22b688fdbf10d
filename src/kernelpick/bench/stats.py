"""Summaries of repeated timings: the median of what is left once outliers are dropped."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TimingSummary:
    """Milliseconds per run over `runs` timed runs, `outliers` of which were dropped (Tukey's fences)."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    runs: int
    outliers: int

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> TimingSummary:
        """Summarize raw per-run times.

        Raises:
            ValueError: no samples.
        """
        if not samples_ms:
            raise ValueError("no timings to summarize")
        ordered = sorted(samples_ms)
        kept = ordered
        if len(ordered) >= 4:
            q1, _, q3 = statistics.quantiles(ordered, n=4)
            low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
            kept = [t for t in ordered if low <= t <= high] or ordered
        quartiles = statistics.quantiles(kept, n=4) if len(kept) >= 2 else [kept[0]] * 3
        return cls(
            median_ms=statistics.median(kept),
            mean_ms=statistics.fmean(kept),
            min_ms=kept[0],
            max_ms=kept[-1],
            iqr_ms=quartiles[2] - quartiles[0],
            runs=len(ordered),
            outliers=len(ordered) - len(kept),
        )

    @classmethod
    def combine(cls, parts: Sequence[TimingSummary]) -> TimingSummary:
        """One summary of several taken alike (the same candidates, interleaved, on GPUs of one model):
        medians and spreads are averaged, runs and outliers added up.

        Raises:
            ValueError: no parts.
        """
        if not parts:
            raise ValueError("no timings to combine")
        if len(parts) == 1:
            return parts[0]
        runs = sum(p.runs - p.outliers for p in parts)
        return cls(
            median_ms=statistics.fmean(p.median_ms for p in parts),
            mean_ms=sum(p.mean_ms * (p.runs - p.outliers) for p in parts) / max(runs, 1),
            min_ms=min(p.min_ms for p in parts),
            max_ms=max(p.max_ms for p in parts),
            iqr_ms=statistics.fmean(p.iqr_ms for p in parts),
            runs=sum(p.runs for p in parts),
            outliers=sum(p.outliers for p in parts),
        )

    def scaled(self, factor: float) -> TimingSummary:
        """These figures times `factor` (screening figures put on the scale of a second round)."""
        return TimingSummary(
            median_ms=self.median_ms * factor,
            mean_ms=self.mean_ms * factor,
            min_ms=self.min_ms * factor,
            max_ms=self.max_ms * factor,
            iqr_ms=self.iqr_ms * factor,
            runs=self.runs,
            outliers=self.outliers,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimingSummary:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})
