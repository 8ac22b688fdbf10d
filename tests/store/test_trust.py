"""What a reader of a store trusts (issue 40, docs/store.md "Who can write what"): rows planted in a
local or shared store, picks naming another's candidates and faults of the store's file never win a
pick, never run, and never fail the user's call. Each test tunes a real kernel in Triton's interpreter."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import triton

import kernelpick
from kernelpick import settings
from kernelpick.config import Config
from kernelpick.engine.record import TuningRecord
from kernelpick.store import RedisStore, SQLiteStore
from kernelpick.store.default import default_store
from kernelpick.store.sqlite import SCHEMA_VERSION
from tests.store.conftest import RedisServer
from tests.store.samples import read_only
from tests.tune.kernels import add_kernel, grid_1d

#: BLOCK=3 never compiles (arange's range must be a power of 2): a forger's favourite to mark ok.
SPACE = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 3})]
FAILING = Config({"BLOCK": 3}).digest
N = 100


def call(folder: Path, redis_url: str = "") -> TuningRecord:
    """A user's call of a tuned kernel, on the machine whose cache folder is `folder`: it must run, and
    compute what it should."""
    with settings.override(cache_dir=folder, redis_url=redis_url):
        kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        x, out = torch.randn(N), torch.empty(N)
        kernel[grid_1d(N)](x, x, out, N)
        torch.testing.assert_close(out, 2 * x)
        assert kernel.last_tuning is not None
        return kernel.last_tuning


def picked_block(record: TuningRecord) -> int:
    return int(record.best.kwargs["BLOCK"])


def status_of(record: TuningRecord, block: int) -> str:
    [result] = [r for config, r in record.results.items() if config.kwargs["BLOCK"] == block]
    return result.status


def forged_ok(median_ms: float) -> dict[str, Any]:
    """A result a forger writes for the failing config: ok, at `median_ms`, its figures consistent."""
    timing = {"mean_ms": median_ms, "min_ms": min(median_ms, 1.0), "max_ms": max(median_ms, 1.0)}
    return {
        "status": "ok",
        "timing": {
            "median_ms": median_ms,
            "iqr_ms": 0.0,
            "runs": 10,
            "outliers": 0,
            "timer": "wallclock",
            **timing,
        },
        "message": "",
    }


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        yield caplog


def store_warnings(logged: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in logged.records if r.name == "kernelpick.store"]


# -- rows planted in a store ------------------------------------------------------------------------


@pytest.mark.parametrize("median_ms", [-1.0, 0.0, float("nan")])
def test_a_forged_redis_entry_marking_a_failing_config_ok_is_not_picked_nor_kept(
    tmp_path: Path, redis_url: str, redis_server: RedisServer, median_ms: float
) -> None:
    assert status_of(call(tmp_path / "first", redis_url), 3) == "compile_error"
    client = redis_server.client()
    [results] = client.keys("kernelpick:1:results:*")
    entry = json.loads(client.hget(results, FAILING))
    client.hset(results, FAILING, json.dumps({**entry, "result": forged_ok(median_ms)}))

    second = call(tmp_path / "second", redis_url)  # a fresh machine: it ran BLOCK=3 before, it raised
    assert picked_block(second) in (16, 64) and status_of(second, 3) == "compile_error"  # measured again
    assert (
        RedisStore(redis_url).load(stored_key(tmp_path / "second"))[FAILING].result.status == "compile_error"
    )
    client.flushall()  # what the fresh machine kept is its own measurement, not the forgery
    assert status_of(call(tmp_path / "second"), 3) == "compile_error"


def stored_key(folder: Path) -> Any:
    """The tuning key the machine of cache folder `folder` stored (its only one)."""
    [key] = {r.key for r in SQLiteStore(folder / "results.sqlite3").rows()}
    return key


@pytest.mark.parametrize(
    "planted",
    [
        json.dumps(forged_ok(-1.0)),
        json.dumps(forged_ok(0.0)),
        json.dumps({**forged_ok(0.5), "message": "CompilationError"}),  # flipped to ok, message left
        "[" * 100_000 + "]" * 100_000,  # a RecursionError while decoding
    ],
)
def test_a_row_planted_in_the_local_store_is_measured_again_and_the_call_runs(
    tmp_path: Path, logged: pytest.LogCaptureFixture, planted: str
) -> None:
    call(tmp_path)
    with sqlite3.connect(tmp_path / "results.sqlite3") as db:
        db.execute("UPDATE results SET result = ? WHERE candidate = ?", (planted, FAILING))
    again = call(tmp_path)
    assert picked_block(again) in (16, 64) and status_of(again, 3) == "compile_error"
    assert not again.from_store  # BLOCK=3's planted row was left out: measured again
    assert len(store_warnings(logged)) == 1 and "not kernelpick data" in store_warnings(logged)[0]


def test_a_candidate_a_redis_writer_added_with_a_pick_naming_it_is_never_picked(
    tmp_path: Path, redis_url: str, redis_server: RedisServer
) -> None:
    first = call(tmp_path / "first", redis_url)
    client = redis_server.client()
    [results] = client.keys("kernelpick:1:results:*")
    digest = results.decode().rpartition(":")[2]
    planted = Config({"BLOCK": 128})  # a config the user never had, faster than any
    entry = {
        "candidate": planted.digest,
        "description": planted.to_dict(),
        "result": forged_ok(1e-6),
        "created": 0.0,
    }
    client.hset(results, planted.digest, json.dumps(entry))
    client.hset("kernelpick:1:picks", digest, planted.digest)

    second = call(tmp_path / "second", redis_url)
    assert second.from_store and picked_block(second) == picked_block(first)
    assert all(config.kwargs["BLOCK"] != 128 for config in second.results)
    # What the second machine's store picks, and a table exported from it, is its own pick; the
    # tuning that ran it saved that pick, to Redis too.
    local = SQLiteStore(tmp_path / "second" / "results.sqlite3")
    [pick] = [row for row in local.rows() if row.picked]
    assert pick.description["kwargs"] == {"BLOCK": picked_block(first)}
    assert RedisStore(redis_url).picked(pick.key) == pick.candidate


def test_a_claim_planted_in_redis_without_expiry_does_not_make_a_tuning_wait(
    tmp_path: Path, redis_url: str, redis_server: RedisServer
) -> None:
    call(tmp_path / "first", redis_url)
    key = stored_key(tmp_path / "first")
    client = redis_server.client()
    client.flushall()  # nothing shared: the next machine must tune the key, claiming it first
    client.set(f"kernelpick:1:claim:{key.digest}", "planted")  # no expiry
    started = time.monotonic()
    with settings.override(wait_timeout_s=20.0):
        second = call(tmp_path / "second", redis_url)
    assert not second.from_store and time.monotonic() - started < 10.0  # it waited all 20 s


# -- faults of the store's file ---------------------------------------------------------------------


def a_folder(cache: Path) -> None:
    (cache / "results.sqlite3").mkdir(parents=True)


def a_newer_schema(cache: Path) -> None:
    with sqlite3.connect(cache / "results.sqlite3") as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")


@pytest.mark.parametrize(
    ("fault", "said"), [(a_folder, "unable to open"), (a_newer_schema, "schema version")]
)
def test_a_store_file_that_cannot_be_opened_costs_one_warning_and_the_call_runs(
    tmp_path: Path, logged: pytest.LogCaptureFixture, fault: Any, said: str
) -> None:
    fault(tmp_path)
    assert not call(tmp_path).from_store and call(tmp_path).from_store  # kept in memory meanwhile
    assert (
        len(store_warnings(logged)) == 1
        and said in store_warnings(logged)[0]
        and "in memory" in store_warnings(logged)[0]
    )


def test_a_full_store_costs_one_warning_and_the_calls_run_from_memory(
    tmp_path: Path, logged: pytest.LogCaptureFixture
) -> None:
    call(tmp_path)
    with settings.override(cache_dir=tmp_path):
        store = default_store()
    assert isinstance(store, SQLiteStore)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
    with settings.override(cache_dir=tmp_path):
        kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        for n in range(1, 40):  # new keys, until the file is full
            x, out = torch.randn(n), torch.empty(n)
            kernel[grid_1d(n)](x, x, out, n)
            torch.testing.assert_close(out, 2 * x)
    assert call(tmp_path).from_store  # what the full file holds is still read
    assert len(store_warnings(logged)) == 1 and "full" in store_warnings(logged)[0]


def test_a_read_only_store_is_read_and_its_calls_run(tmp_path: Path) -> None:
    call(tmp_path)
    with read_only(tmp_path, tmp_path / "results.sqlite3"):
        done = in_new_process(tmp_path)  # a process that never wrote there
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["from_store=True"]  # read, though nothing could be written
    warnings = [line for line in done.stderr.splitlines() if "kernelpick" in line and "cannot" in line]
    assert len(warnings) == 1 and "cannot be used as kernelpick's cache dir" in warnings[0]


def in_new_process(folder: Path) -> subprocess.CompletedProcess[str]:
    """`call(folder)` in a new process, which prints whether its tuning was read from the store."""
    script = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "from tests.store.test_trust import call\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "print(f'from_store={call(Path(sys.argv[1])).from_store}')\n"
    )
    root = str(Path(__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, env=env, timeout=300
    )


# -- a shared store with several writers: signed rows only (KERNELPICK_STORE_KEY_FILE) -------------


def test_with_a_shared_secret_a_well_formed_forgery_in_redis_is_never_picked(
    tmp_path: Path, redis_url: str, redis_server: RedisServer
) -> None:
    secret = tmp_path / "store.key"
    secret.write_text("a secret the tuning machines share\n")
    with settings.override(store_key_file=secret):
        call(tmp_path / "first", redis_url)
    client = redis_server.client()
    [results] = client.keys("kernelpick:1:results:*")
    entry = json.loads(client.hget(results, FAILING))
    forged = {**entry, "result": forged_ok(1e-6)}  # in range and consistent: only a signature tells
    client.hset(results, FAILING, json.dumps(forged))
    assert RedisStore(redis_url).load(stored_key(tmp_path / "first"))[FAILING].result.ok  # no secret: taken

    with settings.override(store_key_file=secret):
        second = call(tmp_path / "second", redis_url)  # without the secret this call raised
    assert picked_block(second) in (16, 64) and status_of(second, 3) == "compile_error"
