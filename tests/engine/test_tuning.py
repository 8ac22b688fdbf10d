"""engine/tuning.py: the steps every tuning takes, once for tuned kernels and selectors alike."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.device import describe
from kernelpick.engine.tuning import Tuning, pick_against_reference
from kernelpick.errors import TuningRequired
from kernelpick.store import CandidateResult, MemoryStore, TuningKey
from tests.store.conftest import RedisServer


def timed(ms: float, spread: float = 0.0, *, stored: bool = False) -> BenchmarkResult:
    summary = TimingSummary(ms, ms, ms * (1 - spread), ms * (1 + spread), 2 * spread * ms, 50, 0, "events")
    return BenchmarkResult("ok", summary, from_store=stored)


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        self.loads += 1
        return super().load(key)


def tuning(store: MemoryStore | None) -> Tuning:
    key = TuningKey.make("add", "source", describe(torch.device("cpu")), [16])
    return Tuning("kernel `add`", "(n=16)", key, store, "cpu")


def test_the_store_is_read_once_and_what_it_holds_is_not_measured_again() -> None:
    store = CountingStore()
    first = tuning(store)
    with first.measuring(lambda digest: {"name": digest}):
        first.save({"a": timed(1.0)}, {"a"}, pick="a")
    second = tuning(store)
    results, todo = second.split(["a", "b"])
    assert list(results) == ["a"] and todo == ["b"]
    second.split(["a", "b"])
    assert store.loads == 1 and "store_read" in second.phases


def test_with_no_tuning_what_is_left_to_measure_is_an_error_naming_it() -> None:
    with (
        settings.override(no_tuning=True),
        pytest.raises(TuningRequired, match=r"kernel `add` has no pick for \(n=16\)"),
    ):
        tuning(MemoryStore()).split(["a", "b"])


def test_a_given_up_compile_is_not_stored() -> None:
    store = MemoryStore()
    step = tuning(store)
    with step.measuring(lambda digest: {}):
        step.save({"a": timed(1.0), "b": BenchmarkResult.failed("skipped", "slow")}, {"a", "b"}, pick="a")
    assert set(tuning(store).split(["a", "b"])[0]) == {"a"}


def test_the_stored_winner_stays_unless_a_new_candidate_clearly_beats_it() -> None:
    # A noisy first look at a new candidate does not displace the winner that earlier tunings kept.
    results = {"old": timed(1.00, 0.05, stored=True), "new": timed(0.99, 0.05)}
    chosen = pick_against_reference(results, None)
    assert chosen.best == "old" and "kept the reference old" in chosen.note
    assert (
        pick_against_reference({"old": timed(1.0, 0.01, stored=True), "new": timed(0.5, 0.01)}, None).best
        == "new"
    )
    # A reference the caller names (a selector's extern, a kernel's default=) comes first.
    assert pick_against_reference(results, "new").best == "new"
    # All new, or all stored: the fastest.
    assert pick_against_reference({"a": timed(1.0, 0.05), "b": timed(0.99, 0.05)}, None).best == "b"


def test_each_result_is_stored_as_it_is_measured_and_the_pick_only_at_the_end() -> None:
    store = MemoryStore()
    step = tuning(store)
    with step.measuring(lambda digest: {"name": digest}) as measured:
        measured("a", timed(2.0))
        assert set(store.load(step.key)) == {"a"} and store.picks == {}  # stored, not picked
        measured("b", timed(1.0))
    step.save({"a": timed(2.0), "b": timed(1.0)}, {"a", "b"}, pick="b")
    assert store.picks == {step.key.digest: "b"}


def test_a_tuning_stopped_before_it_picked_gets_its_pick_from_the_next_which_measures_nothing() -> None:
    store = MemoryStore()
    with tuning(store).measuring(lambda digest: {}) as measured:  # every result stored, then stopped
        measured("a", timed(2.0))
        measured("b", timed(1.0))
    assert store.picks == {}
    next_one = tuning(store)
    results, todo = next_one.split(["a", "b"])
    assert todo == [] and set(results) == {"a", "b"}
    next_one.save({}, (), pick="b")
    assert store.picks == {next_one.key.digest: "b"}
    tuning(store).save({}, (), pick="a")  # a key with a pick keeps it
    assert store.picks == {next_one.key.digest: "b"}


#: A selector of 12 choices that each sleep on every call: measuring one takes a few calls, so a
#: signal sent once some results are stored lands mid-way. Each call writes its process id to a file.
SLEEPY = """
import json, os, sys, time
import torch
from kernelpick import Selector, extern

delay, isolate, calls = float(sys.argv[1]), sys.argv[2] == "on", sys.argv[3]

def choice(number):
    def sleepy(a):
        with open(calls, "a") as marks:
            marks.write(f"{os.getpid()}\\n")
        time.sleep(delay)
        return a + 0
    return extern(sleepy, name=f"sleep{number}")

selector = Selector("sleepy", [choice(n) for n in range(12)], isolate=isolate)
record = selector.tune(torch.ones(4))
print(json.dumps({"measured": sum(not r.result.from_store for r in record.candidates)}))
"""


def _sleepy(folder: Path, delay: float, isolate: bool) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(folder / "cache"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    return subprocess.Popen(
        [sys.executable, "-c", SLEEPY, str(delay), "on" if isolate else "off", str(folder / "calls")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stored(folder: Path, cache: Path | None = None) -> tuple[int, int]:
    """(results, picks) in the store's file (in `cache`, default: folder/cache), read as another
    process would."""
    path = (cache or folder / "cache") / "results.sqlite3"
    if not path.exists():
        return 0, 0
    try:
        with sqlite3.connect(path, timeout=30) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0], db.execute(
                "SELECT COUNT(*) FROM picks"
            ).fetchone()[0]
    except sqlite3.OperationalError:  # the tables are not made yet
        return 0, 0


def _wait_for_rows(
    folder: Path, process: subprocess.Popen[str], count: int, cache: Path | None = None
) -> None:
    deadline = time.monotonic() + 120
    while _stored(folder, cache)[0] < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no results were stored"
        time.sleep(0.05)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_tuning_keeps_what_it_measured_and_the_next_measures_only_the_rest(
    tmp_path: Path, stop: signal.Signals
) -> None:
    process = _sleepy(tmp_path, 0.05, isolate=False)
    _wait_for_rows(tmp_path, process, 4)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)
    assert process.returncode == -stop  # it ends as the signal ends a process
    rows, picks = _stored(tmp_path)
    assert 4 <= rows < 12 and picks == 0  # what was measured, and no pick: the tuning did not finish
    assert "selector `sleepy` (float32[4]) was interrupted" in err
    assert "the next tuning measures only the rest" in err

    again = _sleepy(tmp_path, 0.0, isolate=False)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out)["measured"] == 12 - rows
    assert _stored(tmp_path) == (12, 1)


def test_an_interrupted_isolated_tuning_stops_the_worker_busy_with_a_choice(tmp_path: Path) -> None:
    process = _sleepy(tmp_path, 1.0, isolate=True)  # a choice takes its worker about 4 s
    _wait_for_rows(tmp_path, process, 1)  # the worker has just begun the next choice
    process.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    process.communicate(timeout=60)
    # Not after the worker finished that choice, which nobody waits for: it was killed.
    assert time.monotonic() - signalled < 2.5
    workers = {int(line) for line in (tmp_path / "calls").read_text().split()} - {process.pid}
    assert workers and not any(_alive(pid) for pid in workers)  # the choices ran in a worker, now gone
    rows, picks = _stored(tmp_path)
    assert 1 <= rows < 12 and picks == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- one tuning per key, however many processes need it --------------------------------------------

#: A selector of 8 choices that each sleep on every call (all alike: processes tuning on their own
#: would each pick their own), each call's process id written to a file. It says it is ready (a file
#: named after its process id), waits for a go (the file argv[2]), tunes, and prints what it ran.
ONCE = """
import json, os, sys, time
from pathlib import Path
import torch
from kernelpick import Selector, extern

calls, go, delay = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])

def choice(number):
    def sleepy(a):
        with open(calls, "a") as marks:
            marks.write(f"{os.getpid()} {number}\\n")
        time.sleep(delay)
        return a + 0
    return extern(sleepy, name=f"sleep{number}")

selector = Selector("once", [choice(n) for n in range(8)], reference=lambda a: a + 0)
Path(f"{go}.{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.01)
started = time.monotonic()
record = selector.tune(torch.ones(4))
print(json.dumps({
    "best": record.best,
    "from_store": record.from_store,
    "seconds": time.monotonic() - started,
    "waited": record.phases.get("wait", 0.0),
}))
"""


def _once(folder: Path, cache: Path, delay: float, **environment: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(sys.path),
        **environment,
    }
    return subprocess.Popen(
        [sys.executable, "-c", ONCE, str(folder / "calls"), str(folder / "go"), str(delay)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ready(folder: Path, processes: list[subprocess.Popen[str]]) -> None:
    """Wait until each of `processes` waits for the go."""
    deadline = time.monotonic() + 120
    while not all((folder / f"go.{p.pid}").exists() for p in processes):
        for process in processes:
            assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the processes did not start"
        time.sleep(0.05)


def _finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return {**json.loads(out), "stderr": err}


def _measured_by(folder: Path) -> dict[int, set[int]]:
    """The choices each process called, by process id."""
    found: dict[int, set[int]] = {}
    for line in (folder / "calls").read_text().splitlines():
        pid, number = map(int, line.split())
        found.setdefault(pid, set()).add(number)
    return found


def _together(folder: Path, caches: list[Path], **environment: str) -> list[dict[str, Any]]:
    """Run `ONCE` in a process per cache folder, all tuning at once; what each ran."""
    processes = [_once(folder, cache, 0.002, **environment) for cache in caches]
    _ready(folder, processes)
    (folder / "go").touch()
    return [_finish(process) for process in processes]


def test_processes_needing_one_key_at_once_tune_it_once_and_all_run_its_pick(tmp_path: Path) -> None:
    ran = _together(tmp_path, [tmp_path / "cache"] * 3)
    [measured] = _measured_by(tmp_path).values()  # one process measured
    assert measured == set(range(8))
    assert len({r["best"] for r in ran}) == 1  # every process runs the tuner's pick
    assert sorted(r["from_store"] for r in ran) == [False, True, True]
    assert _stored(tmp_path) == (8, 1)


def test_without_one_tuning_each_process_tunes_the_key_itself(tmp_path: Path) -> None:
    _together(tmp_path, [tmp_path / "cache"] * 2, KERNELPICK_ONE_TUNING="0")
    assert len(_measured_by(tmp_path)) == 2


@pytest.fixture
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.kill()


def test_machines_sharing_redis_tune_a_key_once_and_all_run_its_pick(tmp_path: Path, redis_url: str) -> None:
    # Each process has a store of its own (as on machines of their own), layered over one Redis.
    ran = _together(tmp_path, [tmp_path / f"machine{n}" for n in range(3)], KERNELPICK_REDIS_URL=redis_url)
    [measured] = _measured_by(tmp_path).values()
    assert measured == set(range(8))
    assert len({r["best"] for r in ran}) == 1
    assert sorted(r["from_store"] for r in ran) == [False, True, True]


def _holding(folder: Path, cache: Path, **environment: str) -> subprocess.Popen[str]:
    """A process that has claimed the key and stored a result, measuring the others slowly."""
    holder = _once(folder, cache, 0.5, **environment)  # 2 s a choice: 16 s in all
    (folder / "go").touch()
    _wait_for_rows(folder, holder, 1, cache)
    return holder


def _rows_before(cache: Path, moment: float) -> int:
    """How many results the store in `cache` got before `moment` (`time.time()`)."""
    with sqlite3.connect(cache / "results.sqlite3", timeout=30) as db:
        return int(db.execute("SELECT COUNT(*) FROM results WHERE created < ?", (moment,)).fetchone()[0])


@pytest.mark.parametrize("shared", ["sqlite", "redis"])
def test_a_tuner_killed_mid_tuning_leaves_the_key_to_a_waiter_which_measures_only_the_rest(
    tmp_path: Path, shared: str, request: pytest.FixtureRequest
) -> None:
    environment = {"KERNELPICK_WAIT_TIMEOUT": "60" if shared == "sqlite" else "3"}
    caches = [tmp_path / "cache"] * 2
    if shared == "redis":  # the claim lapses with its lease (3 s: the wait timeout), not at once
        environment["KERNELPICK_REDIS_URL"] = request.getfixturevalue("redis_url")
        caches = [tmp_path / "first", tmp_path / "second"]
    holder = _holding(tmp_path, caches[0], **environment)
    waiter = _once(tmp_path, caches[1], 0.002, **environment)
    _ready(tmp_path, [waiter])
    time.sleep(1.0)  # it reads the store and waits for the claim
    holder.send_signal(signal.SIGKILL)
    killed, killed_at = time.monotonic(), time.time()
    holder.wait(timeout=10)
    ran = _finish(waiter)
    assert time.monotonic() - killed < (10 if shared == "sqlite" else 15)
    assert ran["waited"] > 0.5 and not ran["from_store"]  # it waited for the claim until the kill
    # It measured what the killed tuner had not stored, and only that.
    stored = _rows_before(caches[0], killed_at)
    assert 1 <= stored < 8
    assert len(_measured_by(tmp_path)[waiter.pid]) == 8 - stored


def test_a_waiter_tunes_the_key_itself_when_the_tuner_hangs_past_the_timeout(tmp_path: Path) -> None:
    holder = _holding(tmp_path, tmp_path / "cache", KERNELPICK_WAIT_TIMEOUT="2")
    holder.send_signal(signal.SIGSTOP)
    try:
        waiter = _once(tmp_path, tmp_path / "cache", 0.002, KERNELPICK_WAIT_TIMEOUT="2")
        ran = _finish(waiter)
        assert ran["seconds"] >= 2.0
        assert "tuning it here too" in ran["stderr"]
        assert _measured_by(tmp_path)[waiter.pid]  # it measured what the hung tuner had not stored
    finally:
        holder.kill()
        holder.wait(timeout=10)
