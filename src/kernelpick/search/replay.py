"""Replaying recorded GPU timings, so that search strategies are tried and scored on a CPU."""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kernelpick.bench.result import STATUSES, BenchmarkResult, Status, TimingSummary
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.base import Budget
from kernelpick.search.registry import make_strategy
from kernelpick.search.run import SearchTrace, run_search
from kernelpick.store.base import StoredRow

FORMAT = "kernelpick-recorded-space"
VERSION = 1


@dataclass(frozen=True, slots=True)
class Recorded:
    """How one config did when it was recorded."""

    status: Status
    median_ms: float | None
    spread: float
    compile_s: float
    bench_s: float
    message: str = ""
    runs: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class RecordedSpace:
    """Every config of one tuning problem (a kernel at one shape on one device) with how it did."""

    device: str
    kernel: str
    shape: Mapping[str, Any]
    entries: Mapping[Config, Recorded]
    best_config: Config = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))
        working = [
            (r.median_ms, i, c) for i, (c, r) in enumerate(self.entries.items()) if r.median_ms is not None
        ]
        if not working:
            raise ConfigError(
                f"recorded space of {self.kernel} on {self.device} has no working config: "
                "a replay needs at least one config with status 'ok'"
            )
        object.__setattr__(self, "best_config", min(working)[2])

    @property
    def configs(self) -> list[Config]:
        """The recorded configs, in the order recorded."""
        return list(self.entries)

    @property
    def best_ms(self) -> float:
        """The true best: the fastest recorded time."""
        found = self.entries[self.best_config].median_ms
        assert found is not None
        return found

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def load(cls, path: str | Path) -> RecordedSpace:
        """Read a recorded space from a JSON file (its format: docs/search.md, "Recorded spaces").

        Raises:
            ConfigError: the file cannot be read, or is not a recorded space; the message says where.
        """
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read recorded space {path}: {error}") from None
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(
                f"{path} is not a recorded space ({error}); expected the format described in kernelpick.search.replay"
            ) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecordedSpace:
        """Rebuild a recorded space from the file format (`to_dict()` output, or a recording).

        Raises:
            ValueError, KeyError, TypeError: `data` is not a recorded space.
        """
        if (data.get("format"), data.get("version")) != (FORMAT, VERSION):
            raise ValueError(
                f"format {data.get('format')!r} version {data.get('version')!r}, not {FORMAT!r} version {VERSION}"
            )
        results = list(data["results"])
        for position, entry in enumerate(results):
            if entry["status"] not in STATUSES:
                raise ValueError(
                    f"result {position} has status {entry['status']!r}; expected one of {STATUSES}"
                )
            median = entry.get("median_ms")
            if (entry["status"] == "ok") != (median is not None and float(median) > 0):
                raise ValueError(f"result {position}: a positive median_ms exactly when its status is 'ok'")
        compile_s, bench_overhead_s = _shares(data, results)
        entries = {}
        for entry in results:
            median = entry.get("median_ms")
            runs = int(entry.get("runs", 0))
            kernel_s = 0.0 if median is None else runs * float(median) / 1000
            entries[Config.from_dict(entry["config"])] = Recorded(
                status=entry["status"],
                median_ms=None if median is None else float(median),
                spread=float(entry.get("spread", 0.0)),
                compile_s=float(entry["compile_s"]) if "compile_s" in entry else compile_s,
                bench_s=float(entry["bench_s"])
                if "bench_s" in entry
                else (kernel_s + bench_overhead_s if median is not None else 0.0),
                message=str(entry.get("message", "")),
                runs=runs,
            )
        return cls(str(data["device"]), str(data["kernel"]), dict(data.get("shape", {})), entries)

    def to_dict(self) -> dict[str, Any]:
        """Plain data in the file format, with every config's compile_s and bench_s."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "device": self.device,
            "kernel": self.kernel,
            "shape": dict(self.shape),
            "results": [
                {
                    "config": config.to_data(),
                    "status": r.status,
                    "median_ms": r.median_ms,
                    "spread": r.spread,
                    "runs": r.runs,
                    "message": r.message,
                    "compile_s": r.compile_s,
                    "bench_s": r.bench_s,
                }
                for config, r in self.entries.items()
            ],
        }

    def save(self, path: str | Path) -> None:
        """Write the JSON file (one config a line, so diffs stay readable)."""
        data = self.to_dict()
        results = ",\n  ".join(json.dumps(r) for r in data.pop("results"))
        head = json.dumps(data)[:-1]
        Path(path).write_text(f'{head}, "results": [\n  {results}\n]}}\n')

    @classmethod
    def from_rows(cls, rows: Iterable[StoredRow], *, compile_s: float = 1.0) -> RecordedSpace:
        """A recorded space from the result store's rows of one tuning key (`SQLiteStore.rows(kernel)`).

        The store keeps no compile or timing seconds: each config is taken to compile in `compile_s`
        and to have been timed for as long as its timed runs took (runs * median).

        Raises:
            ConfigError: no rows, or rows of more than one tuning key.
        """
        rows = list(rows)
        keys = {row.key.digest for row in rows}
        if len(keys) != 1:
            raise ConfigError(
                f"a recorded space is one tuning key's rows, got rows of {len(keys)} keys: "
                "pass the rows of one key (filter them by row.key)"
            )
        entries = {}
        for row in rows:
            timing = row.result.timing
            entries[Config.from_dict(row.description)] = Recorded(
                status=row.result.status,
                median_ms=None if timing is None else timing.median_ms,
                spread=0.0 if timing is None else timing.spread,
                compile_s=compile_s,
                bench_s=0.0 if timing is None else timing.runs * timing.median_ms / 1000,
                message=row.result.message,
                runs=0 if timing is None else timing.runs,
            )
        key = rows[0].key
        return cls(key.device, key.kernel, {"inputs": list(key.inputs)}, entries)


def _shares(data: Mapping[str, Any], results: list[Mapping[str, Any]]) -> tuple[float, float]:
    """Each config's compile seconds, and its share of the benchmark phase beyond its timed runs,
    from a recording's whole-run phases; NaN where the recording gives none (every config must then
    carry its own)."""
    phases = data.get("phases") or {}
    workers = int(data.get("cpu_count") or 1)
    working = [r for r in results if r.get("median_ms") is not None]
    if not all("compile_s" in r for r in results) and "compile" not in phases:
        raise ValueError("results lack compile_s and the recording has no phases.compile")
    if not all("bench_s" in r for r in working) and "benchmark" not in phases:
        raise ValueError("results lack bench_s and the recording has no phases.benchmark")
    compile_s = float(phases.get("compile", math.nan)) * workers / max(1, len(results))
    benchmark_s = float(phases.get("benchmark", math.nan))
    if "wall_s" in data and "compile" in phases:
        # Timed in workers beside the compiles, the benchmark phase spans the compile phase: only
        # its part after the compiles is timing the clock does not already count as compiling.
        benchmark_s = min(benchmark_s, float(data["wall_s"]) - float(phases["compile"]))
    kernels_s = sum(int(r.get("runs", 0)) * float(r["median_ms"]) / 1000 for r in working)
    overhead_s = max(0.0, benchmark_s - kernels_s) / max(1, len(working))
    return compile_s, overhead_s


class ReplayBenchmarker:
    """Serves recorded results as if it timed them, on a simulated clock.

    A timing at full effort gives the recorded median; at `effort` < 1 the median is off by seeded
    noise of relative size `spread / sqrt(effort)` (a quicker timing is a noisier one). Each config
    is compiled once, on its first timing: a batch costs the longer of its longest compile and its
    compiles shared over `parallel_compiles` workers, plus each config's timing seconds times effort.

    Raises:
        ConfigError: asked for a config that was not recorded.
    """

    def __init__(self, recorded: RecordedSpace, seed: int = 0, parallel_compiles: int = 16) -> None:
        self.recorded = recorded
        self.seed = seed
        self.parallel_compiles = max(1, parallel_compiles)
        self._seconds = 0.0
        self._compiled: set[Config] = set()
        self._timings: dict[Config, int] = {}

    def clock(self) -> float:
        """Simulated seconds spent so far."""
        return self._seconds

    def measure(self, configs: Sequence[Config], effort: float = 1.0) -> dict[Config, BenchmarkResult]:
        """Results for `configs` at `effort`, advancing the clock by what they would have cost."""
        entries = []
        for config in configs:
            entry = self.recorded.entries.get(config)
            if entry is None:
                raise ConfigError(
                    f"config {config} was not recorded: the recorded space of {self.recorded.kernel} "
                    f"has {len(self.recorded):,} configs; propose only those"
                )
            entries.append(entry)
        compiling = [e.compile_s for c, e in zip(configs, entries) if c not in self._compiled]
        if compiling:
            self._seconds += max(max(compiling), sum(compiling) / self.parallel_compiles)
        self._seconds += sum(e.bench_s for e in entries) * effort
        self._compiled.update(configs)
        return {config: self._result(config, entry, effort) for config, entry in zip(configs, entries)}

    def _result(self, config: Config, entry: Recorded, effort: float) -> BenchmarkResult:
        if entry.median_ms is None:
            return BenchmarkResult.failed(entry.status, entry.message or f"recorded as {entry.status}")
        count = self._timings.get(config, 0)
        self._timings[config] = count + 1
        spread = entry.spread / math.sqrt(effort) if effort < 1 else entry.spread
        median = entry.median_ms
        if effort < 1:
            draw = random.Random(f"{self.seed}:{config.digest}:{effort}:{count}")
            median *= max(0.5, 1 + spread * draw.gauss(0.0, 1.0))
        runs = max(1, round((entry.runs or 10) * effort))
        timing = TimingSummary(
            median_ms=median,
            mean_ms=median,
            min_ms=median * (1 - spread),
            max_ms=median * (1 + spread),
            iqr_ms=2 * spread * median,
            runs=runs,
            outliers=0,
            timer="replay",
        )
        return BenchmarkResult("ok", timing)


@dataclass(frozen=True, slots=True)
class ScoredRun:
    """One search replayed: how close it came to the true best, and what it spent."""

    seed: int
    ratio: float  # the true best time over the true time of the config it picked; 0: it found none
    evaluations: int
    seconds: float  # simulated
    curve: tuple[tuple[float, float], ...]  # (simulated seconds, ratio of the best so far)
    trace: SearchTrace | None = field(default=None, repr=False, compare=False)  # what the search did

    def ratio_at(self, seconds: float) -> float:
        """The ratio of what the search held as its best at `seconds` (0 before anything worked)."""
        reached = 0.0
        for at, ratio in self.curve:
            if at > seconds:
                break
            reached = ratio
        return reached

    def seconds_to(self, ratio: float) -> float:
        """When the best so far first came within `ratio` of the true best (infinity: never)."""
        return next((seconds for seconds, reached in self.curve if reached >= ratio), math.inf)


@dataclass(frozen=True, slots=True)
class Score:
    """A strategy replayed with several seeds on one recorded space."""

    strategy: str
    runs: tuple[ScoredRun, ...]
    exhaustive_seconds: float  # what timing every config costs on the same simulated clock

    @property
    def worst_ratio(self) -> float:
        return min(r.ratio for r in self.runs)

    @property
    def mean_ratio(self) -> float:
        return statistics.fmean(r.ratio for r in self.runs)

    @property
    def mean_evaluations(self) -> float:
        return statistics.fmean(r.evaluations for r in self.runs)

    @property
    def time_fraction(self) -> float:
        """Mean simulated seconds as a fraction of exhaustive's."""
        return statistics.fmean(r.seconds for r in self.runs) / self.exhaustive_seconds

    def time_fraction_to(self, ratio: float) -> float:
        """The slowest run's time to come within `ratio` of the true best, as a fraction of exhaustive's."""
        return max(r.seconds_to(ratio) for r in self.runs) / self.exhaustive_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "exhaustive_seconds": self.exhaustive_seconds,
            "worst_ratio": self.worst_ratio,
            "mean_ratio": self.mean_ratio,
            "mean_evaluations": self.mean_evaluations,
            "time_fraction": self.time_fraction,
            "runs": [
                {
                    "seed": r.seed,
                    "ratio": r.ratio,
                    "evaluations": r.evaluations,
                    "seconds": r.seconds,
                    "curve": [list(p) for p in r.curve],
                }
                for r in self.runs
            ],
        }


def exhaustive_seconds(recorded: RecordedSpace, parallel_compiles: int = 16) -> float:
    """What timing every recorded config in one batch costs on the replay's simulated clock."""
    replay = ReplayBenchmarker(recorded, parallel_compiles=parallel_compiles)
    replay.measure(recorded.configs, 1.0)
    return replay.clock()


def score(
    strategy_name: str,
    recorded: RecordedSpace,
    budget: Budget | None = None,
    seeds: Iterable[int] = (0, 1, 2),
    *,
    parallel_compiles: int = 16,
) -> Score:
    """Replay the search `strategy_name` on `recorded` once per seed and score it against the true best.

    The config a run picks is judged by its recorded time, not the (maybe noisy) time the search saw.

    Raises:
        ConfigError: an unknown strategy name.
    """
    runs = []
    for seed in seeds:
        replay = ReplayBenchmarker(recorded, seed=seed, parallel_compiles=parallel_compiles)
        strategy = make_strategy(strategy_name, recorded.configs, seed=seed, budget=budget)
        trace = run_search(strategy, replay.measure, clock=replay.clock)
        picked = trace.best
        curve = tuple((seconds, _ratio(recorded, e.config)) for seconds, e in trace.progress())
        ratio = 0.0 if picked is None else _ratio(recorded, picked.config)
        runs.append(ScoredRun(seed, ratio, trace.used, trace.seconds, curve, trace))
    return Score(strategy_name, tuple(runs), exhaustive_seconds(recorded, parallel_compiles))


def _ratio(recorded: RecordedSpace, config: Config) -> float:
    found = recorded.entries[config].median_ms
    return 0.0 if found is None else recorded.best_ms / found
