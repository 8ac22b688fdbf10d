"""Stores under load and faults: many processes tuning at once, Redis killed mid-run, a damaged file."""

from __future__ import annotations

import logging
import multiprocessing
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
import triton

import kernelpick
from kernelpick import settings
from kernelpick.store import LayeredStore, RedisStore, ResultStore, SQLiteStore
from kernelpick.store.base import StoredRow
from tests.store.conftest import RedisServer
from tests.store.samples import make_key, measured
from tests.tune.kernels import add_kernel, grid_1d

WORKERS, KEYS, CANDIDATES, JOBS_EACH = 8, 32, 8, 16  # each key is tuned by 4 of the 8 workers


def expected_ms(key_index: int, candidate: int) -> float:
    """What candidate `candidate` measures under key `key_index`: the same in every process."""
    return 1.0 + ((key_index * 7 + candidate * 3) % 11) / 4


def best(key_index: int) -> str:
    return f"c{min(range(CANDIDATES), key=lambda c: expected_ms(key_index, c))}"


def open_store(spec: tuple[str, ...]) -> ResultStore:
    """("sqlite", path) or ("layered", local path, Redis URL): what one process opens."""
    if spec[0] == "sqlite":
        return SQLiteStore(spec[1])
    return LayeredStore(SQLiteStore(spec[1]), RedisStore(spec[2], timeout_s=1.0))


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _in_worker(work: Any, worker: int, spec: tuple[str, ...], barrier: Any, outcomes: Any) -> None:
    """Run `work(store, worker)` in a child process; report the store's warnings or the traceback."""
    count = _Count()
    logging.getLogger("kernelpick.store").addHandler(count)
    try:
        barrier.wait()
        work(open_store(spec), worker)
        outcomes.put((worker, count.messages, None))
    except BaseException:
        outcomes.put((worker, count.messages, traceback.format_exc()))
        raise


def run_workers(work: Any, specs: list[tuple[str, ...]], *, during: Any = None) -> dict[int, list[str]]:
    """Run `work` in one forked process per spec, all starting together; `during()` runs meanwhile.

    Returns:
        Each worker's warnings from the "kernelpick.store" logger.
    """
    context = multiprocessing.get_context("fork")
    barrier, outcomes = context.Barrier(len(specs)), context.Queue()
    processes = [
        context.Process(target=_in_worker, args=(work, worker, spec, barrier, outcomes))
        for worker, spec in enumerate(specs)
    ]
    for process in processes:
        process.start()
    if during is not None:
        during()
    reports = [outcomes.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    failures = [error for _, _, error in reports if error]
    assert not failures, failures[0]
    assert [p.exitcode for p in processes] == [0] * len(specs)
    return {worker: messages for worker, messages, _ in reports}


def tune_jobs(store: ResultStore, worker: int) -> None:
    """Tune this worker's keys like the autotuner: load, measure what is missing, save with the pick
    (in two saves, as when configs are added to a space: more writes to interleave with the others')."""
    for key_index in sorted(tuned_keys(worker), key=lambda k: (k - worker) % KEYS):
        key = make_key("mm", key_index)
        known = store.load(key)
        missing = [
            measured(f"c{c}", expected_ms(key_index, c)) for c in range(CANDIDATES) if f"c{c}" not in known
        ]
        store.save(key, missing[: len(missing) // 2])
        store.save(key, missing[len(missing) // 2 :], pick=best(key_index))


def assert_every_result_once(
    rows: Iterable[StoredRow], key_indices: Iterable[int], *, picks: bool = True
) -> None:
    """Every (key, candidate) expected is there once, with its value, and each key's pick is its best
    (with `picks`; else no key has a pick)."""
    rows = list(rows)  # parses every row
    counts = Counter((row.key, row.candidate) for row in rows)
    expected = {(make_key("mm", k), f"c{c}") for k in key_indices for c in range(CANDIDATES)}
    assert set(counts) == expected
    assert set(counts.values()) == {1}
    for row in rows:
        (key_index,) = row.key.inputs
        assert row.result.median_ms == expected_ms(key_index, int(row.candidate[1:]))
        assert row.picked == (picks and row.candidate == best(key_index))
        assert row.result.from_store and row.description["name"] == row.candidate


def tuned_keys(worker: int) -> set[int]:
    return {(worker + job * 2) % KEYS for job in range(JOBS_EACH)}


# -- many processes -----------------------------------------------------------------------------


def test_eight_processes_tuning_overlapping_jobs_on_one_sqlite_file(tmp_path: Path) -> None:
    path = str(tmp_path / "results.sqlite3")
    warnings = run_workers(tune_jobs, [("sqlite", path)] * WORKERS)
    assert_every_result_once(SQLiteStore(path).rows(), range(KEYS))
    assert warnings == {worker: [] for worker in warnings}  # on failure, the warnings show


@pytest.mark.parametrize("local", ["own file each", "one shared file"])
def test_eight_processes_tuning_overlapping_jobs_through_redis(
    tmp_path: Path, redis_url: str, local: str
) -> None:
    paths = [
        tmp_path / (f"machine{w}.sqlite3" if local == "own file each" else "shared.sqlite3")
        for w in range(WORKERS)
    ]
    warnings = run_workers(tune_jobs, [("layered", str(path), redis_url) for path in paths])
    assert warnings == {worker: [] for worker in warnings}  # on failure, the warnings show
    assert_every_result_once(RedisStore(redis_url).rows(), range(KEYS))
    if local == "own file each":
        for worker, path in enumerate(paths):  # what it measured and what it read from the others
            assert_every_result_once(SQLiteStore(path).rows(), tuned_keys(worker))
    # A ninth machine, new, reads every result through Redis and measures nothing; the picks in its
    # own file are those its tunings make, not copied from Redis.
    ninth = LayeredStore(SQLiteStore(tmp_path / "ninth.sqlite3"), RedisStore(redis_url))
    for key_index in range(KEYS):
        assert len(ninth.load(make_key("mm", key_index))) == CANDIDATES
    assert_every_result_once(SQLiteStore(tmp_path / "ninth.sqlite3").rows(), range(KEYS), picks=False)


SPACE = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})]
SIZES = [100, 200, 300, 400, 500, 600]


def _autotune(cache_dir: str, redis_url: str, sizes: list[int], outcomes: Any) -> None:
    """One machine tuning a real kernel (in Triton's interpreter) with its own cache dir and Redis."""
    try:
        with settings.override(cache_dir=cache_dir, redis_url=redis_url):
            kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
            for n in sizes:
                x, out = torch.randn(n), torch.empty(n)
                kernel[grid_1d(n)](x, x, out, n)
                torch.testing.assert_close(out, 2 * x)
        outcomes.put(None)
    except BaseException:
        outcomes.put(traceback.format_exc())
        raise


def test_processes_autotuning_a_real_kernel_share_results_through_redis(
    tmp_path: Path, redis_url: str
) -> None:
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as on separate machines
    outcomes = context.Queue()
    processes = [
        context.Process(
            target=_autotune, args=(str(tmp_path / f"machine{w}"), redis_url, SIZES[w : w + 3], outcomes)
        )
        for w in range(4)
    ]
    for process in processes:
        process.start()
    failures = [outcomes.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    assert failures == [None] * 4, next(f for f in failures if f)

    rows = list(RedisStore(redis_url).rows("add_kernel"))
    assert Counter(row.key.inputs[0] for row in rows if row.picked) == Counter(SIZES)  # one pick a size
    assert len(rows) == len(SIZES) * len(SPACE)
    # A fifth machine tunes nothing: every result comes from the shared store.
    with settings.override(cache_dir=tmp_path / "fifth", redis_url=redis_url):
        kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        for n in SIZES:
            x, out = torch.randn(n), torch.empty(n)
            kernel[grid_1d(n)](x, x, out, n)
            torch.testing.assert_close(out, 2 * x)
            assert kernel.last_tuning.from_store
            assert all(result.from_store for result in kernel.last_tuning.results.values())


# -- faults -----------------------------------------------------------------------------------

STEPS = 40


def save_and_load_slowly(store: ResultStore, worker: int) -> None:
    for step in range(STEPS):
        key = make_key("mm", worker * STEPS + step)
        store.save(key, [measured(f"c{c}", expected_ms(step, c)) for c in range(CANDIDATES)], pick=best(step))
        assert len(store.load(key)) == CANDIDATES
        time.sleep(0.01)


def test_redis_killed_mid_run_the_run_finishes_on_local_results_with_one_warning(
    tmp_path: Path, own_redis_server: RedisServer
) -> None:
    workers = 4
    client = own_redis_server.client()

    def kill_after_some_progress() -> None:
        deadline = time.monotonic() + 30
        while client.hlen("kernelpick:1:keys") < 2 * workers and time.monotonic() < deadline:
            time.sleep(0.005)
        own_redis_server.kill()

    specs = [("layered", str(tmp_path / f"machine{w}.sqlite3"), own_redis_server.url) for w in range(workers)]
    start = time.monotonic()
    warnings = run_workers(save_and_load_slowly, specs, during=kill_after_some_progress)
    assert time.monotonic() - start < 30
    for worker, messages in warnings.items():
        assert len(messages) == 1, messages
        assert "local store alone" in messages[0]
        rows = list(SQLiteStore(tmp_path / f"machine{worker}.sqlite3").rows())
        assert len(rows) == STEPS * CANDIDATES and len({(r.key, r.candidate) for r in rows}) == len(rows)


def save_to_a_damaged_store(store: ResultStore, worker: int) -> None:
    for step in range(5):
        store.save(make_key("mm", worker, step), [measured("c0", 1.0)], pick="c0")


def test_processes_opening_a_damaged_store_at_once_rebuild_it_once(damaged_store: Path) -> None:
    warnings = run_workers(save_to_a_damaged_store, [("sqlite", str(damaged_store))] * WORKERS)
    asides = damaged_store.parent.glob("results.sqlite3.corrupt-*")
    [aside] = [path for path in asides if not path.name.endswith(("-wal", "-shm"))]  # its log goes too
    messages = [message for worker in warnings.values() for message in worker]
    assert len(messages) == 1 and str(aside) in messages[0] and str(damaged_store) in messages[0]
    rows = list(SQLiteStore(damaged_store).rows())
    saved = sorted(row.key.inputs for row in rows if len(row.key.inputs) == 2)
    assert saved == [(w, s) for w in range(WORKERS) for s in range(5)]
    kept = len(rows) - len(saved)  # the damaged store's readable rows, copied once
    assert 1900 < kept < 2000 and f"with the {kept} results" in messages[0]
