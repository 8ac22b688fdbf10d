"""cli/cache.py on stores that lie or fail (issue 40): planted rows are named, counted alike and removed,
bad tables refused, read-only stores read, and a reader that stops reading is no error."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpick.bench.result import BenchmarkResult
from kernelpick.store.sqlite import SQLiteStore
from tests.cli.test_cache import FAILED, A, B, C, configs, key, ok
from tests.cli.test_commands import run_cli
from tests.store.samples import read_only
from tests.store.test_sqlite import as_version_1

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A store of two mm keys and one add key, with three rows planted in the mm keys: one nested too
    deep to decode, one marked ok at a negative time, and a failure its key's pick names."""
    path = tmp_path / "store" / "results.sqlite3"
    store = SQLiteStore(path)
    store.save(key(1024), configs((A, ok(2.0)), (B, ok(1.25)), (C, FAILED)), pick=B.digest)
    store.save(key(2048), configs((A, ok(3.0)), (B, ok(4.0))), pick=A.digest)
    store.save(key(64, kernel="add"), configs((A, ok(1.0))), pick=A.digest)
    store.close()
    negative = json.dumps({**ok(1.0).to_dict(), "timing": {**ok(1.0).to_dict()["timing"], "median_ms": -1.0}})
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE results SET description = ? WHERE candidate = ? AND key = ?",
            (DEEP, A.digest, key(1024).digest),
        )
        db.execute(
            "UPDATE results SET result = ? WHERE candidate = ? AND key = ?",
            (negative, B.digest, key(2048).digest),
        )
        db.execute("UPDATE picks SET candidate = ? WHERE key = ?", (C.digest, key(1024).digest))
    return path


def test_planted_rows_are_named_by_verify_counted_alike_and_removed_by_prune(
    capsys: pytest.CaptureFixture[str], planted: Path
) -> None:
    code, out, err = run_cli(capsys, "cache", "list", "--store", str(planted))  # crashed on the deep row
    assert code == 0 and "3 corrupt rows" in err and "(1024)" in out

    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(planted), "--json")
    problems = {c["candidate"]: c["problems"] for c in json.loads(out)["corrupt"]}
    assert code == 1 and set(problems) == {A.digest, B.digest, C.digest}
    assert "description is JSON nested too deep to decode" in problems[A.digest]
    assert "result's timing.median_ms is -1.0, not a finite time >= 0" in problems[B.digest]
    assert "its key's pick names it, and its status is 'compile_error'" in problems[C.digest][0]

    code, out, _ = run_cli(capsys, "cache", "stats", "--store", str(planted), "--json")
    stats = json.loads(out)  # the total and the kernels' counts agree (they did not)
    assert stats["corrupt"] == 3 and sum(k["corrupt"] for k in stats["kernels"]) == 3
    assert {k["kernel"]: k["corrupt"] for k in stats["kernels"]} == {"add": 0, "mm": 3}

    code, out, _ = run_cli(capsys, "cache", "prune", "--corrupt", "--store", str(planted))
    assert code == 0 and "removed 3 rows of 2 keys" in out
    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(planted))
    assert code == 0 and "all 3 rows" in out


@pytest.mark.parametrize(
    ("result", "why"),
    [
        ({"status": "ok", "timing": {**ok(1.0).to_dict()["timing"], "median_ms": "fast"}}, "not a number"),
        ({"status": "ok", "timing": {**ok(1.0).to_dict()["timing"], "median_ms": -2.0}}, "median_ms is -2.0"),
        ({"status": "ok", "timing": None}, "timings exactly when its status is 'ok'"),
    ],
)
def test_import_refuses_a_table_whose_winner_lies_and_stores_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, result: dict[str, object], why: str
) -> None:
    source = tmp_path / "source.sqlite3"
    SQLiteStore(source).save(key(1024), configs((A, ok(2.0))), pick=A.digest)
    table = tmp_path / "table.json"
    assert run_cli(capsys, "cache", "export", str(table), "--store", str(source))[0] == 0
    data = json.loads(table.read_text())
    data["entries"][0]["result"] = result
    table.write_text(json.dumps(data))
    target = tmp_path / "target.sqlite3"
    code, _, err = run_cli(capsys, "cache", "import", str(table), "--store", str(target))
    assert code == 2 and "is not a kernelpick deployment table" in err and why in err
    assert not target.exists() or list(SQLiteStore(target).rows()) == []


def test_import_of_a_table_nested_too_deep_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = tmp_path / "table.json"
    table.write_text(DEEP)
    code, _, err = run_cli(capsys, "cache", "import", str(table), "--store", str(tmp_path / "target.sqlite3"))
    assert code == 2 and "nested too deep" in err


def test_a_folder_given_as_the_store_is_named_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    SQLiteStore(tmp_path / "results.sqlite3").save(key(1024), configs((A, ok(2.0))))
    code, out, err = run_cli(capsys, "cache", "list", "--store", str(tmp_path))
    assert code == 2 and out == ""  # it said "nothing was tuned" with this folder full of results
    assert f"{tmp_path} is a folder, not a result store: pass --store {tmp_path / 'results.sqlite3'}" in err


def test_list_verify_and_export_read_a_read_only_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "store" / "results.sqlite3"
    SQLiteStore(path).save(key(1024), configs((A, ok(2.0)), (B, ok(1.0))), pick=B.digest)
    with read_only(path, path.parent):
        assert run_cli(capsys, "cache", "list", "--store", str(path))[0] == 0
        code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(path))
        assert code == 0 and "all 2 rows" in out
        assert run_cli(capsys, "cache", "export", str(tmp_path / "t.json"), "--store", str(path))[0] == 0
        code, _, err = run_cli(capsys, "cache", "prune", "--all", "--store", str(path))
        assert code == 2 and "read-only" in err
    assert json.loads((tmp_path / "t.json").read_text())["entries"][0]["candidate"] == B.digest


def test_list_and_verify_read_a_read_only_store_of_schema_version_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "store" / "results.sqlite3"
    SQLiteStore(path).save(key(1024), configs((A, ok(2.0)), (B, ok(1.0))), pick=B.digest)
    as_version_1(path)
    with read_only(path, path.parent):
        code, out, err = run_cli(capsys, "cache", "list", "--store", str(path))
        assert code == 0 and "unfinished" in out and err == ""  # "no such table: picks" before
        code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(path))
        assert code == 0 and "all 2 rows" in out


def test_a_reader_that_stops_reading_is_no_error(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    store = SQLiteStore(path)
    for n in range(1000):  # a listing far larger than a pipe holds
        store.save(
            key(n), configs((A, ok(2.0)), (B, BenchmarkResult.failed("timeout", "10 s"))), pick=A.digest
        )
    store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = f"{sys.executable} -m kernelpick.cli cache list --json --store {path} | head -n 1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout == "[\n" and done.stderr == ""  # it ended "kernelpick: error: [Errno 32] Broken pipe"
