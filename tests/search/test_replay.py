"""search/replay.py: recorded spaces are read and written as documented, replayed exactly at full
effort and with seeded noise below it, on a simulated clock that charges compiles once; scores
judge a search by the recorded time of what it picked."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.errors import ConfigError
from kernelpick.search import Budget
from kernelpick.search.replay import Recorded, RecordedSpace, ReplayBenchmarker, exhaustive_seconds, score
from kernelpick.store.base import CandidateResult
from kernelpick.store.keys import TuningKey
from kernelpick.store.sqlite import SQLiteStore
from tests.search.synthetic import recorded_gemm

A, B, C = Config({"BLOCK": 16}), Config({"BLOCK": 32}, num_warps=8), Config({"BLOCK": 64})
SMALL = RecordedSpace(
    "NVIDIA H100 80GB HBM3",
    "add",
    {"N": 4096},
    {
        A: Recorded("ok", 2.0, 0.01, compile_s=3.0, bench_s=0.5),
        B: Recorded("ok", 1.0, 0.02, compile_s=1.0, bench_s=0.25, runs=40),
        C: Recorded("out_of_resources", None, 0.0, compile_s=2.0, bench_s=0.0, message="needs 300 KiB"),
    },
)


def test_a_recorded_space_is_saved_and_loaded_in_the_documented_format(tmp_path: Path) -> None:
    path = tmp_path / "add.json"
    SMALL.save(path)
    data = json.loads(path.read_text())
    assert (data["format"], data["version"]) == ("kernelpick-recorded-space", 1)
    assert (data["device"], data["kernel"], data["shape"]) == ("NVIDIA H100 80GB HBM3", "add", {"N": 4096})
    assert data["results"][1] == {
        "config": B.to_dict(),
        "status": "ok",
        "median_ms": 1.0,
        "spread": 0.02,
        "runs": 40,
        "message": "",
        "compile_s": 1.0,
        "bench_s": 0.25,
    }
    assert len(path.read_text().splitlines()) == 5  # a config a line
    loaded = RecordedSpace.load(path)
    assert loaded == SMALL and loaded.configs == [A, B, C]
    assert (loaded.best_config, loaded.best_ms, len(loaded)) == (B, 1.0, 3)


def test_a_recording_without_seconds_per_config_shares_out_its_phases(tmp_path: Path) -> None:
    data = SMALL.to_dict()
    for entry in data["results"]:
        del entry["compile_s"], entry["bench_s"]
    data["results"][0]["runs"] = 10
    data.update(cpu_count=4, phases={"compile": 6.0, "benchmark": 1.0}, environment={"python": "3.12"})
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(data))
    loaded = RecordedSpace.load(path)
    # 6 s of compiling on 4 workers for 3 configs: 8 s each; the benchmark phase beyond the timed
    # runs (1 s - 10 * 2 ms - 40 * 1 ms) shared by the 2 configs that ran.
    assert [r.compile_s for r in loaded.entries.values()] == [8.0, 8.0, 8.0]
    assert loaded.entries[A].bench_s == pytest.approx(0.020 + 0.47)
    assert loaded.entries[B].bench_s == pytest.approx(0.040 + 0.47)
    assert loaded.entries[C].bench_s == 0.0
    del data["phases"]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"results lack compile_s and the recording has no phases\.compile"):
        RecordedSpace.load(path)


def test_a_recording_timed_beside_its_compiles_shares_out_only_the_timing_after_them(tmp_path: Path) -> None:
    data = SMALL.to_dict()
    for entry in data["results"]:
        del entry["compile_s"], entry["bench_s"]
    # Timed in workers: the benchmark phase (6.5 s) spans the compile phase (6 s) of a 6.2 s run.
    data.update(cpu_count=1, wall_s=6.2, phases={"compile": 6.0, "benchmark": 6.5})
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(data))
    loaded = RecordedSpace.load(path)
    # The 0.2 s after the compiles, beyond the timed runs (40 * 1 ms of B), shared by A and B:
    # replayed on one compiler, exhaustive takes the recording's wall time.
    assert loaded.entries[B].bench_s == pytest.approx(0.040 + 0.08)
    assert exhaustive_seconds(loaded, parallel_compiles=1) == pytest.approx(6.2)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(version=2), "format 'kernelpick-recorded-space' version 2, not"),
        (lambda d: d["results"][0].update(status="slow"), "result 0 has status 'slow'"),
        (lambda d: d["results"][2].update(median_ms=1.0), "result 2: a positive median_ms exactly when"),
        (lambda d: d.pop("results"), "results"),
        (lambda d: d.update(results=[d["results"][2]]), "has no working config"),
    ],
)
def test_a_file_that_is_not_a_recorded_space_is_refused_naming_it(
    tmp_path: Path, change: object, expected: str
) -> None:
    data = SMALL.to_dict()
    change(data)  # type: ignore[operator]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=expected) as raised:
        RecordedSpace.load(path)
    assert str(raised.value).startswith(f"{path} is not a recorded space (")
    with pytest.raises(ConfigError, match="cannot read recorded space"):
        RecordedSpace.load(tmp_path / "missing.json")


def test_full_effort_replays_the_recording_and_failures_keep_their_status() -> None:
    replay = ReplayBenchmarker(SMALL)
    results = replay.measure([A, B, C], 1.0)
    assert (results[A].median_ms, results[B].median_ms) == (2.0, 1.0)
    assert math.isclose(results[B].timing.spread, 0.02)  # type: ignore[union-attr]
    assert results[C] == BenchmarkResult.failed("out_of_resources", "needs 300 KiB")


def test_the_clock_charges_each_compile_once_shared_by_parallel_workers_and_timing_by_effort() -> None:
    replay = ReplayBenchmarker(SMALL, parallel_compiles=2)
    replay.measure([A, B], 1.0)
    assert replay.clock() == max(3.0, (3.0 + 1.0) / 2) + 0.5 + 0.25
    replay.measure([A, C], 0.5)  # A is compiled already; C compiles alone
    assert replay.clock() == 3.75 + 2.0 + 0.5 * (0.5 + 0.0)
    many = ReplayBenchmarker(SMALL, parallel_compiles=1)
    many.measure([A, B, C], 1.0)
    assert many.clock() == 6.0 + 0.75 == exhaustive_seconds(SMALL, parallel_compiles=1)


def test_quicker_timings_are_noisier_by_the_recorded_spread_and_repeat_with_the_seed() -> None:
    recorded = recorded_gemm(small=True)
    working = [c for c in recorded.configs if recorded.entries[c].ok]

    def errors(effort: float, seed: int = 0) -> list[float]:
        results = ReplayBenchmarker(recorded, seed=seed).measure(working, effort)
        return [
            (results[c].median_ms / recorded.entries[c].median_ms - 1) / recorded.entries[c].spread  # type: ignore[operator]
            for c in working
        ]

    assert errors(1.0) == [0.0] * len(working)
    quarter, sixteenth = statistics.pstdev(errors(0.25)), statistics.pstdev(errors(1 / 16))
    assert 1.6 < quarter < 2.4 and 3.2 < sixteenth < 4.8  # spread / sqrt(effort)
    assert errors(0.25) == errors(0.25) and errors(0.25, seed=1) != errors(0.25)


def test_a_replay_does_not_depend_on_how_the_configs_are_batched() -> None:
    one, other = ReplayBenchmarker(SMALL, seed=3), ReplayBenchmarker(SMALL, seed=3)
    together = one.measure([A, B], 0.1)
    apart = {**other.measure([B], 0.1), **other.measure([A], 0.1)}
    assert together == apart
    assert one.measure([A], 0.1) != together  # a second quick timing is another draw


def test_a_config_that_was_not_recorded_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"was not recorded: the recorded space of add has 3 configs"):
        ReplayBenchmarker(SMALL).measure([Config({"BLOCK": 128})], 1.0)


def test_a_recorded_space_is_built_from_one_keys_rows_of_the_result_store(tmp_path: Path) -> None:
    device = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
    store = SQLiteStore(tmp_path / "results.sqlite3")
    key = TuningKey.make("add", "source", device, [4096])
    timing = TimingSummary(
        median_ms=2.0, mean_ms=2.0, min_ms=1.9, max_ms=2.1, iqr_ms=0.04, runs=50, outliers=0
    )
    store.save(
        key,
        [
            CandidateResult(A.digest, A.to_dict(), BenchmarkResult("ok", timing)),
            CandidateResult(C.digest, C.to_dict(), BenchmarkResult.failed("compile_error", "bad")),
        ],
    )
    recorded = RecordedSpace.from_rows(store.rows("add"), compile_s=1.5)
    assert (recorded.device, recorded.kernel, recorded.shape) == (
        "NVIDIA H100 80GB HBM3",
        "add",
        {"inputs": [4096]},
    )
    assert recorded.entries[A] == Recorded("ok", 2.0, 0.01, compile_s=1.5, bench_s=0.1, runs=50)
    assert recorded.entries[C] == Recorded(
        "compile_error", None, 0.0, compile_s=1.5, bench_s=0.0, message="bad"
    )
    store.save(
        TuningKey.make("add", "source", device, [8192]),
        [CandidateResult(B.digest, B.to_dict(), BenchmarkResult("ok", timing))],
    )
    with pytest.raises(ConfigError, match="rows of 2 keys: pass the rows of one key"):
        RecordedSpace.from_rows(store.rows("add"))


def test_a_score_judges_the_pick_by_its_recorded_time_against_exhaustives() -> None:
    recorded = recorded_gemm(small=True)
    exhaustive = score("exhaustive", recorded, None, seeds=(0,))
    assert exhaustive.worst_ratio == 1.0 and exhaustive.time_fraction == 1.0
    assert exhaustive.runs[0].evaluations == len(recorded)
    halving = score("halving", recorded, Budget(max_evaluations=30), seeds=(0, 1))
    for run in halving.runs:
        assert run.evaluations <= 30 and 0 < run.ratio <= 1
        assert run.ratio_at(run.seconds) == run.ratio and run.ratio_at(-1.0) == 0.0
        assert run.seconds_to(run.ratio) <= run.seconds and run.seconds_to(1.01) == math.inf
    data = json.loads(json.dumps(halving.to_dict()))
    assert data["strategy"] == "halving" and [r["seed"] for r in data["runs"]] == [0, 1]
    assert data["worst_ratio"] == halving.worst_ratio
