"""`TuningRecord`: what one tuning found, for people and programs (`kernel.last_tuning`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.console import FittingTable, headline
from kernelpick.device import DeviceInfo
from kernelpick.search.run import SearchTrace
from kernelpick.select.record import autotune_table
from kernelpick.store.text import candidate_name


@dataclass(frozen=True, slots=True)
class TuningRecord:
    """The outcome of tuning one kernel for one key.

    `results` holds every config considered, measured now or read from the store (empty when pruning
    left a single config: there was nothing to choose between); `from_store` is True when nothing had
    to be measured; `note` says why `best` is not the fastest, when the reference was kept
    (`kernelpick.bench.pick`); `key_text` is the key for people ("(M=128, N=4096)"), which `title`
    puts after the kernel's name.
    """

    kernel: str
    key: tuple[Any, ...]
    device: DeviceInfo
    results: Mapping[Config, BenchmarkResult]
    best: Config
    seconds: float
    from_store: bool
    phases: Mapping[str, float] = field(default_factory=dict)  # seconds per step: compile, benchmark, ...
    note: str = ""
    search: SearchTrace | None = None  # what a search (other than timing every config) did
    #: Why the configs were timed in this process although isolation was wanted (None: they were not).
    timed_here: str | None = None
    key_text: str = ""

    @property
    def title(self) -> str:
        """What its AUTOTUNE table is titled: the kernel's name, as the store knows it (what
        `kernelpick cache show` takes), and its key."""
        return f"{self.kernel}{self.key_text}"

    @property
    def failed(self) -> dict[Config, BenchmarkResult]:
        return {c: r for c, r in self.results.items() if not r.ok}

    def to_dict(self) -> dict[str, Any]:
        """Plain data, e.g. for `--json` output."""
        return {
            "kernel": self.kernel,
            "device": self.device.name,
            "interpreter": self.device.interpreter,
            "best_config": self.best.to_data(),
            "note": self.note,
            "tuning_seconds": self.seconds,
            "cache_hit": self.from_store,
            "n_configs": max(1, len(self.results)),
            "n_failed": len(self.failed),
            "phases": dict(self.phases),
            "results": [{"config": c.to_data(), **r.to_dict()} for c, r in self.results.items()],
            "search": None if self.search is None else self.search.to_dict(),
        }


def failure_report(kernel: str, key: tuple[Any, ...], results: Mapping[Config, BenchmarkResult]) -> str:
    """The message of `NoValidConfigs`: each config of `kernel` and why it failed for `key`."""
    lines = [f"all {len(results)} configs of kernel `{kernel}` failed for key {key[:-1]}:"]
    lines += [f"  {config}: {r.status}: {headline(r.message, 300)}" for config, r in results.items()]
    lines.append("fix the configs or the kernel; each reason above is what the compiler or the launch said")
    return "\n".join(lines)


def record_table(record: TuningRecord) -> FittingTable:
    """The AUTOTUNE table of one tuning record, titled `record.title`."""
    rows = [(candidate_name(config.to_dict()), result) for config, result in record.results.items()]
    notes = [record.note] if record.note else []
    if record.search is not None:
        notes.append(record.search.summary())
    if record.timed_here is not None:
        notes.append(f"timed in this process, not in workers: {record.timed_here}")
    return autotune_table(
        record.title,
        rows,
        record.device,
        record.seconds,
        best=candidate_name(record.best.to_dict()),
        note="\n".join(notes),
    )
