"""What benchmarking one candidate gave, as plain data: its `BenchmarkResult` and `TimingSummary`."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args


@dataclass(frozen=True, slots=True)
class TimingSummary:
    """Milliseconds per run over `runs` timed runs, `outliers` of which were dropped (Tukey's fences).

    The figures are device time, taken by the timer named in `timer` ("cudagraph", "profiler",
    "events", "wallclock", "user"). `host_ms`, when measured, is the host time of one call among
    back-to-back calls: it ranks only where a selection is measured as eager calls run (`cost`).
    """

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    runs: int
    outliers: int
    timer: str = ""
    host_ms: float | None = None

    @classmethod
    def of(cls, samples_ms: Sequence[float], timer: str = "") -> TimingSummary:
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
            timer=timer,
        )

    @property
    def cost_ms(self) -> float:
        """What ranks candidates by default: the median device time, as a CUDA graph replays a call.

        The host's figures of one call swing between processes more than most differences they would
        decide, and where the host bounds a program, CUDA graphs take it away (docs/measurement.md).
        """
        return self.median_ms

    def cost(self, measure: str = "graph") -> float:
        """What a call costs measured as `measure` says: "graph", the device time (`cost_ms`); "eager",
        the larger of the device and host time per call (calls launched one by one run no faster than
        the host issues them), or the device time where no host time was measured."""
        if measure == "eager" and self.host_ms is not None:
            return max(self.median_ms, self.host_ms)
        return self.median_ms

    @property
    def spread(self) -> float:
        """How much runs vary, relative to the median: half the interquartile range over the median."""
        return 0.5 * self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0

    def with_host(self, host_ms: float | None) -> TimingSummary:
        return replace(self, host_ms=host_ms)

    @classmethod
    def combine(cls, parts: Sequence[TimingSummary]) -> TimingSummary:
        """One summary of several taken alike (the same candidates, interleaved, on GPUs of one model):
        medians and spreads are averaged, runs and outliers added up.

        Raises:
            ValueError: no parts.
        """
        if len(parts) == 1:
            return parts[0]
        runs = sum(p.runs - p.outliers for p in parts)
        hosts = [p.host_ms for p in parts if p.host_ms is not None]
        return cls(
            median_ms=statistics.fmean(p.median_ms for p in parts),
            mean_ms=sum(p.mean_ms * (p.runs - p.outliers) for p in parts) / max(runs, 1),
            min_ms=min(p.min_ms for p in parts),
            max_ms=max(p.max_ms for p in parts),
            iqr_ms=statistics.fmean(p.iqr_ms for p in parts),
            runs=sum(p.runs for p in parts),
            outliers=sum(p.outliers for p in parts),
            timer=parts[0].timer,
            host_ms=statistics.fmean(hosts) if hosts else None,
        )

    def scaled(self, factor: float) -> TimingSummary:
        """These device figures times `factor` (screening figures put on the scale of a second round);
        the host time is the host's and stays."""
        figures = ("median_ms", "mean_ms", "min_ms", "max_ms", "iqr_ms")  # the device milliseconds
        return replace(self, **{name: getattr(self, name) * factor for name in figures})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimingSummary:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


Status = Literal[
    "ok",  # timed; `timing` holds the figures
    "compile_error",  # the compiler rejected it
    "out_of_resources",  # needs more shared memory, registers or threads than the device has
    "runtime_error",  # it raised when launched
    "wrong_result",  # it ran but its output differs from the reference
    "timeout",  # it did not finish in time
    "crashed",  # it killed the process running it
    "skipped",  # a search gave up its compile, far slower than the others' (never stored)
]
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass(frozen=True, slots=True)
class BenchmarkResult:
    """The outcome of benchmarking one config or choice.

    `status` is "ok" exactly when `timing` is set; otherwise `message` says what went wrong.
    `from_store` is True when the result was read from the result store instead of measured now.
    """

    status: Status
    timing: TimingSummary | None = None
    message: str = ""
    from_store: bool = False
    #: Seconds the compiler spent on the candidate where known (forked compilers, the interpreter's
    #: lowering); None otherwise.
    compile_s: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        if (self.status == "ok") != (self.timing is not None):
            raise ValueError("a result has timings exactly when its status is 'ok'")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def storable(self) -> bool:
        """False for a result that says nothing lasting about its candidate (a skipped compile)."""
        return self.status != "skipped"

    @property
    def median_ms(self) -> float:
        """The median device time, or infinity for a failed candidate (for sorting only: check `ok`)."""
        return self.timing.median_ms if self.timing is not None else float("inf")

    @property
    def cost_ms(self) -> float:
        """`median_ms`, by the name the rankings use (`TimingSummary.cost_ms`)."""
        return self.median_ms

    def cost(self, measure: str = "graph") -> float:
        """`TimingSummary.cost`, or infinity for a failed candidate."""
        return self.timing.cost(measure) if self.timing is not None else float("inf")

    @classmethod
    def failed(cls, status: Status, message: str, compile_s: float | None = None) -> BenchmarkResult:
        return cls(status=status, message=message, compile_s=compile_s)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["from_store"]  # where it was read from, not what it is
        if self.compile_s is None:
            del data["compile_s"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, from_store: bool = False) -> BenchmarkResult:
        timing = data.get("timing")
        timing = None if timing is None else TimingSummary.from_dict(timing)
        return cls(data["status"], timing, data.get("message", ""), from_store, data.get("compile_s"))
