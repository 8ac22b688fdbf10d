"""store/table.py: deployment tables hold each key's pick, read back exactly, and say what is wrong with a bad file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.errors import TableError
from kernelpick.store.base import CandidateResult
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.sqlite import SQLiteStore
from kernelpick.store.table import export_table, read_table

OLD, NEW = Toolchain("3.6.0", "2.11.0", "13.0"), Toolchain("3.9.0", "2.13.0", "13.0")


def key(m: int, device: str = "NVIDIA H100 80GB HBM3", toolchain: Toolchain = NEW) -> TuningKey:
    return TuningKey("mm", "measure-2:abc", device, "9.0", toolchain, (m, 4096, "torch.float16"))


def ok(ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([ms]))


def row(name: str, result: BenchmarkResult) -> CandidateResult:
    return CandidateResult(f"digest-{name}", {"kwargs": {"BLOCK": name}}, result)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "results.sqlite3")


def test_the_pick_is_exported_even_when_another_candidate_measured_faster(store: SQLiteStore) -> None:
    # The never-lose rule kept the reference "a"; the table runs what tuning ran, not the raw fastest.
    store.save(key(16), [row("a", ok(1.00)), row("b", ok(0.99))], pick="digest-a")
    store.save(key(32), [row("a", ok(2.0)), row("b", ok(1.0))], pick="digest-b")
    store.save(key(64), [row("a", ok(2.0)), row("b", ok(1.0))])  # interrupted: no pick recorded
    store.save(key(128), [row("a", BenchmarkResult.failed("compile_error", "no"))])  # nothing worked
    table = export_table(store.rows())
    assert [(e.inputs[0], e.candidate) for e in table.entries] == [(16, "digest-a"), (32, "digest-b")]
    assert (table.device, table.capability, table.toolchain) == ("NVIDIA H100 80GB HBM3", "9.0", NEW)


def test_a_table_reads_back_equal_and_its_rows_are_the_stored_keys(
    store: SQLiteStore, tmp_path: Path
) -> None:
    store.save(key(16), [row("a", ok(1.0))], pick="digest-a")
    table = export_table(store.rows())
    path = table.write(tmp_path / "tables" / "h100.json")
    again = read_table(path)
    assert again.entries == table.entries and again.path == path
    [(stored_key, stored)] = again.stored()
    assert stored_key == key(16) and stored.digest == "digest-a"
    text = path.read_text()
    assert text.count("\n") > 20  # indented: one value per line, for people and diffs
    assert "import" not in json.loads(text)["entries"][0]["choice"]  # plain data


def test_several_devices_or_toolchains_must_be_named(store: SQLiteStore) -> None:
    store.save(key(16), [row("a", ok(1.0))])
    store.save(key(16, device="NVIDIA H200"), [row("a", ok(1.0))])
    with pytest.raises(
        TableError, match=r"2 device models are stored \(NVIDIA H100 80GB HBM3, NVIDIA H200\)"
    ):
        export_table(store.rows())
    assert export_table(store.rows(), device="NVIDIA H200").device == "NVIDIA H200"
    with pytest.raises(TableError, match="no results stored for device 'A100'"):
        export_table(store.rows(), device="A100")

    store.save(key(32, toolchain=OLD), [row("a", ok(1.0))], pick="digest-a")
    with pytest.raises(TableError, match=r"under 2 toolchains.*triton 3.6.0, torch 2.11.0"):
        export_table(store.rows(), device="NVIDIA H100 80GB HBM3")
    old = export_table(store.rows(), device="NVIDIA H100 80GB HBM3", toolchain=OLD)
    assert [e.inputs[0] for e in old.entries] == [32]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        ('{"entries": []}', "no 'kernelpick_table' format field"),
        ('{"kernelpick_table": 7}', "format version 7; this kernelpick reads version 1"),
        (
            '{"kernelpick_table": 1, "device": "x", "capability": "", "entries": {},'
            ' "toolchain": {"triton": "1", "torch": "2", "cuda": null}}',
            "entries is dict, not a list",
        ),
    ],
)
def test_a_bad_file_is_refused_with_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "table.json"
    path.write_text(content)
    with pytest.raises(TableError, match=message):
        read_table(path)
    with pytest.raises(TableError, match=r"cannot read the deployment table .*missing.json"):
        read_table(tmp_path / "missing.json")


def test_a_tabled_failure_is_refused(store: SQLiteStore, tmp_path: Path) -> None:
    store.save(key(16), [row("a", ok(1.0))], pick="digest-a")
    data = export_table(store.rows()).to_dict()
    data["entries"][0]["result"] = {"status": "crashed", "timing": None, "message": "boom"}
    path = tmp_path / "table.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TableError, match="entry 0: its pick has status 'crashed'"):
        read_table(path)


def test_mismatch_names_the_first_field_that_differs(store: SQLiteStore) -> None:
    store.save(key(16), [row("a", ok(1.0))])
    table = export_table(store.rows())
    assert table.mismatch("NVIDIA H100 80GB HBM3", "9.0", NEW) is None
    assert table.mismatch("NVIDIA H200", "9.0", NEW) == (
        "its device model is 'NVIDIA H100 80GB HBM3', here it is 'NVIDIA H200'"
    )
    assert (
        table.mismatch("NVIDIA H100 80GB HBM3", "9.0", OLD)
        == "its triton version is '3.9.0', here it is '3.6.0'"
    )
