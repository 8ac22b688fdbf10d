"""`BenchmarkResult`: what benchmarking one candidate gave, failures included, as plain data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from kernelpick.bench.stats import TimingSummary

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
        """What a call costs (`TimingSummary.cost_ms`), or infinity for a failed candidate: candidates
        are ranked by it."""
        return self.timing.cost_ms if self.timing is not None else float("inf")

    def cost(self, measure: str = "graph") -> float:
        """`TimingSummary.cost`, or infinity for a failed candidate."""
        return self.timing.cost(measure) if self.timing is not None else float("inf")

    @classmethod
    def failed(cls, status: Status, message: str, compile_s: float | None = None) -> BenchmarkResult:
        return cls(status=status, message=message, compile_s=compile_s)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "timing": None if self.timing is None else self.timing.to_dict(),
            "message": self.message,
        }
        if self.compile_s is not None:
            data["compile_s"] = self.compile_s
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, from_store: bool = False) -> BenchmarkResult:
        timing = data.get("timing")
        return cls(
            status=data["status"],
            timing=None if timing is None else TimingSummary.from_dict(timing),
            message=data.get("message", ""),
            from_store=from_store,
            compile_s=data.get("compile_s"),
        )
