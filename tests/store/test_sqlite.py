"""store/sqlite.py: results survive the process, are shared safely between processes, and stay plain data."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import pytest
import triton.language as tl

from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.errors import StoreError
from kernelpick.store.base import CandidateResult
from kernelpick.store.sqlite import SCHEMA_VERSION, SQLiteStore
from tests.store.samples import make_key as key
from tests.store.samples import ok, read_only, write_damaged_store


def stored(config: Config, result: BenchmarkResult) -> CandidateResult:
    return CandidateResult(config.digest, config.to_dict(), result)


A, B = Config({"BLOCK": 32}), Config({"BLOCK": 64}, num_warps=8)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "results.sqlite3"


def test_save_then_load_gives_the_results_back_marked_as_stored(path: Path) -> None:
    store = SQLiteStore(path)
    failed = BenchmarkResult.failed("compile_error", "CompilationError: arange's range must be a power of 2")
    store.save(key(), [stored(A, ok(1.25)), stored(B, failed)])
    loaded = store.load(key())
    assert set(loaded) == {A.digest, B.digest}
    assert loaded[A.digest].result.timing == ok(1.25).timing
    assert loaded[A.digest].result.from_store
    assert (loaded[B.digest].result.status, loaded[B.digest].result.message) == (
        failed.status,
        failed.message,
    )
    assert Config.from_dict(loaded[B.digest].description) == B
    assert path.is_file()  # the folder was created


def test_saving_a_candidate_again_replaces_its_result(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key(), [stored(A, ok(2.0)), stored(B, ok(3.0))])
    store.save(key(), [stored(A, ok(1.0))])
    loaded = store.load(key())
    assert loaded[A.digest].result.median_ms == 1.0
    assert loaded[B.digest].result.median_ms == 3.0
    assert store.summary() == [{"kernel": "mm", "keys": 1, "results": 2, "failed": 0}]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("result", "not json"),
        ("result", '{"status": "fine", "timing": null}'),  # a status kernelpick never writes
        ("result", "[1, 2]"),
        ("description", '"a string"'),
        (  # parses as a result, but its median would reach the pick's comparisons as text
            "result",
            json.dumps({"status": "ok", "timing": {**ok(2.0).to_dict()["timing"], "median_ms": "fast"}}),
        ),
    ],
)
def test_a_row_that_is_not_kernelpick_data_is_left_out_of_a_load_with_a_warning(
    path: Path, caplog: pytest.LogCaptureFixture, column: str, value: str
) -> None:
    store = SQLiteStore(path)
    store.save(key(), [stored(A, ok(1.0)), stored(B, ok(2.0))])
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE results SET {column} = ? WHERE candidate = ?", (value, B.digest))
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        loaded = SQLiteStore(path).load(key())
    assert set(loaded) == {A.digest}  # B is measured again, and its new result replaces the row
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert str(path) in warning and B.digest[:12] in warning and "kernelpick cache verify" in warning


def test_sqlite_failing_to_read_is_a_store_error_naming_the_file(path: Path) -> None:
    store = SQLiteStore(path)
    with store._lock:
        store._db.execute("DROP TABLE results")  # as if another program broke the file underneath
    with pytest.raises(StoreError, match=rf"cannot read the result store {path}: no such table"):
        store.load(key())


def test_results_of_one_key_are_not_seen_under_another(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key("mm", 1024), [stored(A, ok(1.0))])
    assert store.load(key("mm", 2048)) == {}
    assert store.load(key("bmm", 1024)) == {}
    assert set(store.load(key("mm", 1024))) == {A.digest}


def test_descriptions_may_hold_dtypes(path: Path) -> None:
    config = Config({"BLOCK": 32, "ACC": tl.float32})
    store = SQLiteStore(path)
    store.save(key(), [stored(config, ok(1.0))])
    description = store.load(key())[config.digest].description
    assert description["kwargs"]["BLOCK"] == 32
    assert "float32" in description["kwargs"]["ACC"]  # plain data: a string, never an object


def test_results_persist_in_a_new_store_on_the_same_file(path: Path) -> None:
    first = SQLiteStore(path)
    first.save(key(), [stored(A, ok(1.5))])
    first.close()
    assert SQLiteStore(path).load(key())[A.digest].result.median_ms == 1.5


_CHILD = """
import json, sys
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.result import TimingSummary
from kernelpick.store.base import CandidateResult
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.sqlite import SQLiteStore

store = SQLiteStore(sys.argv[1])
key = TuningKey("mm", "source-hash", "cpu", "", Toolchain("3.9.0", "2.13.0", None), (1024,))
print(json.dumps({digest: r.result.median_ms for digest, r in store.load(key).items()}))
store.save(key, [CandidateResult("from-child", {}, BenchmarkResult("ok", TimingSummary.of([7.0])))])
"""


def test_results_persist_across_processes(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key(), [stored(A, ok(1.5))])
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(child.stdout) == {A.digest: 1.5}
    assert store.load(key())["from-child"].result.median_ms == 7.0  # the open store sees the child's write


def _write_many(path: str, worker: int, count: int, barrier: Any, errors: Any) -> None:
    try:
        barrier.wait()
        store = SQLiteStore(path)  # opened concurrently too: schema creation must not race
        for index in range(count):
            result = CandidateResult(f"w{worker}-{index}", {"worker": worker}, ok(1.0 + index))
            store.save(key("mm", index % 3), [result])
        store.close()
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def test_processes_writing_at_once_lose_nothing(path: Path) -> None:
    context = multiprocessing.get_context("fork")
    workers, count = 4, 30
    barrier, errors = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(target=_write_many, args=(str(path), worker, count, barrier, errors))
        for worker in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert errors.empty(), errors.get()
    assert [p.exitcode for p in processes] == [0] * workers
    store = SQLiteStore(path)
    loaded = {digest for index in range(3) for digest in store.load(key("mm", index))}
    assert loaded == {f"w{w}-{i}" for w in range(workers) for i in range(count)}


def _open_write_close(path: str, worker: int, barrier: Any, errors: Any) -> None:
    try:
        barrier.wait()
        for index in range(15):
            store = SQLiteStore(path)
            store.save(key("mm", worker), [CandidateResult(f"o{worker}-{index}", {}, ok(1.0))])
            store.close()
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def test_processes_opening_the_store_while_others_write(tmp_path: Path) -> None:
    # Like the ranks of a distributed job, each tuning kernels and opening the store as it goes.
    # The race this guards against is narrow: a few rounds on new files make it likely to show.
    context = multiprocessing.get_context("fork")
    workers, errors = 6, context.Queue()
    for attempt in range(4):
        path = tmp_path / f"attempt{attempt}.sqlite3"
        barrier = context.Barrier(workers)
        processes = [
            context.Process(target=_open_write_close, args=(str(path), worker, barrier, errors))
            for worker in range(workers)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=60)
        assert errors.empty(), errors.get()
        assert [p.exitcode for p in processes] == [0] * workers
        stored = sum(len(SQLiteStore(path).load(key("mm", worker))) for worker in range(workers))
        assert stored == 15 * workers


def test_threads_sharing_one_store_lose_nothing(path: Path) -> None:
    store = SQLiteStore(path)

    def write(worker: int) -> None:
        for index in range(25):
            store.save(key(), [CandidateResult(f"t{worker}-{index}", {}, ok(1.0))])

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.load(key())) == 100


def test_a_store_of_another_schema_version_is_refused_with_what_to_do(path: Path) -> None:
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(
        StoreError,
        match=rf"schema version {SCHEMA_VERSION + 1}.*delete the file or point KERNELPICK_CACHE_DIR",
    ):
        SQLiteStore(path)


def test_summary_counts_keys_results_and_failures_per_kernel(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key("mm", 1), [stored(A, ok(1.0)), stored(B, BenchmarkResult.failed("timeout", "10 s"))])
    store.save(key("mm", 2), [stored(A, ok(1.0))])
    store.save(key("add", 1), [stored(A, ok(1.0))])
    summary = sorted(store.summary(), key=lambda row: row["kernel"])
    assert summary == [
        {"kernel": "add", "keys": 1, "results": 1, "failed": 0},
        {"kernel": "mm", "keys": 2, "results": 3, "failed": 1},
    ]


def test_clear_forgets_one_kernel_or_everything(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key("mm"), [stored(A, ok(1.0)), stored(B, ok(2.0))])
    store.save(key("add"), [stored(A, ok(1.0))])
    assert store.clear("mm") == 2
    assert store.load(key("mm")) == {}
    assert set(store.load(key("add"))) == {A.digest}
    assert store.clear() == 1
    assert store.summary() == []
    assert SQLiteStore(path).load(key("add")) == {}  # cleared on disk, not only in this process


def test_rows_give_every_result_with_its_key_and_which_candidate_was_picked(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key("mm", 64), [stored(A, ok(2.0)), stored(B, ok(1.0))], pick=A.digest)
    store.save(key("add", 8), [stored(A, ok(3.0))])
    rows = list(store.rows())
    assert [(r.key.kernel, r.key.inputs, r.candidate, r.picked) for r in rows] == [
        ("add", (8,), A.digest, False),
        *sorted([("mm", (64,), A.digest, True), ("mm", (64,), B.digest, False)], key=lambda r: r[2]),
    ]
    assert rows[0].key == key("add", 8)  # the key rebuilt from plain data is the key it was stored under
    assert [r.kernel for r in (row.key for row in store.rows("mm"))] == ["mm", "mm"]


def test_a_later_tuning_moves_the_pick_and_clearing_a_kernel_drops_its_picks(path: Path) -> None:
    store = SQLiteStore(path)
    store.save(key(), [stored(A, ok(2.0))], pick=A.digest)
    store.save(key(), [stored(B, ok(1.0))], pick=B.digest)
    assert {r.candidate: r.picked for r in store.rows()} == {A.digest: False, B.digest: True}
    store.clear("mm")
    assert list(store.rows()) == []
    assert store._db.execute("SELECT COUNT(*) FROM picks").fetchone()[0] == 0


def test_a_version_1_store_opens_and_gains_the_picks_table(path: Path) -> None:
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE results (key TEXT NOT NULL, candidate TEXT NOT NULL, kernel TEXT NOT NULL, "
        "key_data TEXT NOT NULL, description TEXT NOT NULL, status TEXT NOT NULL, median_ms REAL, "
        "result TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (key, candidate)); PRAGMA user_version=1;"
    )
    db.close()
    store = SQLiteStore(path)
    store.save(key(), [stored(A, ok(1.0))], pick=A.digest)
    assert [r.picked for r in store.rows()] == [True]
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def as_version_1(path: Path) -> None:
    """Make the store at `path` one of schema version 1 (no `picks` table), as older kernelpicks wrote."""
    with sqlite3.connect(path) as db:
        db.executescript("DROP TABLE picks; PRAGMA user_version=1;")


@pytest.mark.parametrize("folder_read_only", [False, True])
def test_a_read_only_version_1_store_is_read_as_it_is_without_its_picks(
    path: Path, caplog: pytest.LogCaptureFixture, folder_read_only: bool
) -> None:
    filled = SQLiteStore(path)
    filled.save(key(), [stored(A, ok(1.0)), stored(B, ok(2.0))], pick=A.digest)
    filled.close()
    as_version_1(path)  # it cannot gain its picks table where it cannot be written
    before = path.read_bytes()
    with read_only(path, *([path.parent] if folder_read_only else [])), caplog.at_level(logging.WARNING):
        store = SQLiteStore(path, on_fault="memory")  # the default store's
        assert store.read_only and set(store.load(key())) == {A.digest, B.digest}
        assert store.picked(key()) is None  # version 1 kept no picks: a tuning picks among these
        assert {r.candidate: r.picked for r in store.rows()} == {A.digest: False, B.digest: False}
        assert len(store.raw_rows()) == 2 and store.dangling_picks() == []
        assert caplog.records == []  # it warned "no such table: picks", and tools could not read it
        store.save(key(), [stored(A, ok(3.0))], pick=A.digest)  # kept in memory, with one warning
        assert store.picked(key()) == A.digest and len(caplog.records) == 1
    assert path.read_bytes() == before


# -- a damaged file ---------------------------------------------------------------------------


def _one_warning(caplog: pytest.LogCaptureFixture) -> str:
    messages = [
        r.getMessage()
        for r in caplog.records
        if r.name == "kernelpick.store" and r.levelno >= logging.WARNING
    ]
    assert len(messages) == 1, messages
    return messages[0]


def test_a_file_that_is_not_a_database_is_moved_aside_and_an_empty_store_takes_its_place(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path.parent.mkdir(parents=True)
    text = b"this is not a database, it is only text " * 100
    path.write_bytes(text)
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        store = SQLiteStore(path)
    [aside] = path.parent.glob("results.sqlite3.corrupt-*")
    assert aside.read_bytes() == text  # kept for a person to look at, not deleted
    warning = _one_warning(caplog)
    assert str(path) in warning and str(aside) in warning
    store.save(key(), [stored(A, ok(1.0))])
    assert set(SQLiteStore(path).load(key())) == {A.digest}


def test_garbage_written_into_a_store_is_found_when_it_is_opened_and_its_readable_rows_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    damaged_store = tmp_path / "results.sqlite3"
    write_damaged_store(damaged_store, picks=True)
    size = damaged_store.stat().st_size
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        store = SQLiteStore(damaged_store)
    [aside] = damaged_store.parent.glob("results.sqlite3.corrupt-*")
    assert aside.stat().st_size == size  # kept for a person to look at, as it was
    assert SQLiteStore.integrity_problems(aside) != []
    rows = list(store.rows())
    # Four damaged pages of table rows lose the rows on them (a few dozen), not those after them.
    assert 1900 < len(rows) < 2000
    warning = _one_warning(caplog)
    assert str(damaged_store) in warning and str(aside) in warning
    assert f"with the {len(rows)} results that could still be read" in warning
    inputs = {row.key.inputs for row in rows}
    assert (0,) in inputs and (99,) in inputs  # before and after the damage
    for row in rows:  # each kept as it was saved
        assert row.key.kernel == "mm" and row.result.median_ms == 1.0 + int(row.candidate[1:])
        assert row.picked == (row.candidate == "c0")  # the picks, on pages of their own, all kept
    assert SQLiteStore.integrity_problems(damaged_store) == []
    store.save(key(), [stored(A, ok(1.0))])
    store.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        assert set(SQLiteStore(damaged_store).load(key())) == {A.digest}  # sound now: opens quietly
    assert caplog.records == []


def test_a_store_of_a_newer_schema_is_not_taken_for_a_damaged_one(path: Path) -> None:
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.execute("CREATE TABLE of_a_later_kernelpick (x)")
    db.close()
    with pytest.raises(StoreError, match="schema version"):
        SQLiteStore(path)
    assert list(path.parent.glob("*.corrupt-*")) == []  # left where it is, its tables kept
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("of_a_later_kernelpick",)]


# -- what a reader trusts: rows checked, picks only of sound ok rows (issue 40 items 3 and 7) ------


def marked_ok(median_ms: float, *, min_ms: float | None = None, message: str = "") -> str:
    """A failed row's result column rewritten as a forger would: status ok, at `median_ms`."""
    timing = {**ok(1.0).to_dict()["timing"], "median_ms": median_ms, "mean_ms": median_ms}
    timing.update(min_ms=median_ms if min_ms is None else min_ms, max_ms=max(median_ms, 1.0))
    return json.dumps({"status": "ok", "timing": timing, "message": message})


@pytest.mark.parametrize(
    ("planted", "why"),
    [
        (marked_ok(-1.0), "timing.median_ms is -1.0"),
        (marked_ok(0.0), "median_ms is 0.0, not a time > 0"),
        (marked_ok(1e-3, message="CompilationError: no"), "with a failure's message"),
        (marked_ok(0.5, min_ms=0.9), "is not between its min_ms"),
        ("[" * 50000 + "]" * 50000, "nested too deep"),
    ],
)
def test_a_planted_row_is_left_out_of_loads_with_one_warning(
    path: Path, caplog: pytest.LogCaptureFixture, planted: str, why: str
) -> None:
    store = SQLiteStore(path)
    failed = BenchmarkResult.failed("compile_error", "CompilationError: arange's range must be a power of 2")
    store.save(key(), [stored(A, ok(1.0)), stored(B, failed)], pick=A.digest)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE results SET result = ? WHERE candidate = ?", (planted, B.digest))
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        reader = SQLiteStore(path)
        assert set(reader.load(key())) == {A.digest} and set(reader.load(key())) == {A.digest}
        assert [r.candidate for r in reader.rows()] == [A.digest]  # left out here too, not raised
    [warning, listed] = [r.getMessage() for r in caplog.records]
    assert why in warning and "measured again" in warning and why in listed


def test_a_pick_counts_only_where_it_names_a_sound_ok_row(path: Path) -> None:
    store = SQLiteStore(path)
    failed = BenchmarkResult.failed("timeout", "10 s")
    store.save(key("mm", 1), [stored(A, ok(1.0)), stored(B, failed)], pick=B.digest)  # planted
    store.save(key("mm", 2), [stored(A, ok(1.0))], pick="never-stored")
    store.save(key("mm", 3), [stored(A, ok(1.0))], pick=A.digest)
    assert [store.picked(key("mm", n)) for n in (1, 2, 3)] == [None, None, A.digest]
    assert {(r.key.inputs, r.candidate) for r in store.rows() if r.picked} == {((3,), A.digest)}


# -- faults: a store that cannot be written, read-only or full (issue 40 items 6 and 9) ------------


def test_a_read_only_store_is_read_without_writing_anything(path: Path) -> None:
    filled = SQLiteStore(path)
    filled.save(key(), [stored(A, ok(1.0))], pick=A.digest)
    filled.close()
    before = sorted(p.name for p in path.parent.iterdir()), path.read_bytes()
    with read_only(path, path.parent):
        store = SQLiteStore(path)  # no journal_mode=WAL, no CREATE: they would write
        assert store.read_only and set(store.load(key())) == {A.digest} and store.picked(key()) == A.digest
        assert [r.candidate for r in store.rows()] == [A.digest] and store.claims() is None
        with pytest.raises(StoreError, match="read-only here"):
            store.save(key(), [stored(B, ok(2.0))])
        kept = SQLiteStore(path, on_fault="memory")  # the default store's: kept in memory
        kept.save(key(), [stored(B, ok(2.0))], pick=B.digest)
        assert set(kept.load(key())) == {A.digest, B.digest} and kept.picked(key()) == B.digest
        assert SQLiteStore.integrity_problems(path) == []
    assert (sorted(p.name for p in path.parent.iterdir()), path.read_bytes()) == before


def test_a_full_store_keeps_the_results_of_a_tuning_in_memory_with_one_warning(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(path, on_fault="memory")
    store.save(key("mm", 0), [stored(A, ok(1.0))])
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
    big = {"kwargs": {"BLOCK": 32}, "padding": "x" * 20000}
    with caplog.at_level(logging.WARNING, logger="kernelpick.store"):
        for n in (1, 2):
            store.save(key("mm", n), [CandidateResult(A.digest, big, ok(1.0))], pick=A.digest)
    assert [set(store.load(key("mm", n))) for n in (0, 1, 2)] == [{A.digest}] * 3
    assert store.picked(key("mm", 2)) == A.digest
    [warning] = [r.getMessage() for r in caplog.records]
    assert "full" in warning and str(path) in warning and "in memory" in warning
    strict = SQLiteStore(path)
    strict._db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreError, match="full"):
        strict.save(key("mm", 3), [CandidateResult(A.digest, big, ok(1.0))])


def test_the_store_and_its_lock_are_private_to_the_user_under_a_permissive_umask(path: Path) -> None:
    before = os.umask(0o002)
    try:
        SQLiteStore(path).save(key(), [stored(A, ok(1.0))])
    finally:
        os.umask(before)
    for made in (path, path.with_name(f"{path.name}.lock"), path.with_name(f"{path.name}-wal")):
        assert stat.S_IMODE(made.stat().st_mode) == 0o600, made
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
