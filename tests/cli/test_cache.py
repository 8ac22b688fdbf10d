"""cli/cache.py: `kernelpick cache ...` lists, shows, exports, imports, prunes and verifies the result store."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import triton

import kernelpick
from kernelpick import settings
from kernelpick.bench.benchmarker import MEASUREMENT_VERSION
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.bench.verify import VERIFICATION_VERSION
from kernelpick.config import Config
from kernelpick.store.base import CandidateResult
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.sqlite import SQLiteStore
from kernelpick.store.text import candidate_name
from tests.cli.test_commands import run_cli
from tests.reports.samples import GEMM_SUITE_H100, store_of_suite
from tests.tune.kernels import add_kernel, grid_1d

NOW = Toolchain.current()
OLD = Toolchain("3.0.0", "2.4.0+cu121", "12.1")
H100 = "NVIDIA H100 80GB HBM3"
A, B, C = Config({"BLOCK": 32}), Config({"BLOCK": 64}, num_warps=8), Config({"BLOCK": 4096})
MM_SOURCE = f"{MEASUREMENT_VERSION}:mm-source-hash"


def key(
    *inputs: object,
    kernel: str = "mm",
    device: str = "cpu",
    toolchain: Toolchain = NOW,
    source: str = MM_SOURCE,
) -> TuningKey:
    capability = "9.0" if device == H100 else ""
    return TuningKey(kernel, source, device, capability, toolchain, inputs or (1024, "torch.float16"))


def ok(median_ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([median_ms], timer="wallclock"))


FAILED = BenchmarkResult.failed("compile_error", "CompilationError: arange's range must be a power of 2")


def name(config: Config) -> str:
    """A config as every table and command names it."""
    return candidate_name(config.to_dict())


def configs(*pairs: tuple[Config, BenchmarkResult]) -> list[CandidateResult]:
    return [CandidateResult(config.digest, config.to_dict(), result) for config, result in pairs]


def extern(name: str, result: BenchmarkResult) -> CandidateResult:
    return CandidateResult(
        f"digest-{name}", {"kind": "extern", "name": name, "callable": f"torch.{name}"}, result
    )


GEMM = key(
    [{"dtype": "float16", "size": [64, 32], "stride": [32, 1], "offset": 0}],
    kernel="gemm",
    source=VERIFICATION_VERSION,
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "results.sqlite3"


@pytest.fixture
def filled(path: Path) -> Path:
    """Two mm keys (one with a failed config), a selector key, and an mm key tuned on an H100."""
    store = SQLiteStore(path)
    store.save(key(1024, "torch.float16"), configs((A, ok(2.0)), (B, ok(1.25)), (C, FAILED)), pick=B.digest)
    store.save(key(2048, "torch.float16"), configs((A, ok(3.0)), (B, ok(4.0))), pick=A.digest)
    store.save(GEMM, [extern("mm", ok(0.5)), extern("addmm", ok(0.75))], pick="digest-mm")
    store.save(key(1024, "torch.float16", device=H100), configs((A, ok(0.01))), pick=A.digest)
    store.close()
    return path


def lines_with(out: str, *words: str) -> list[str]:
    return [line for line in out.splitlines() if all(word in line for word in words)]


def test_list_shows_each_key_with_its_pick_and_counts(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    code, out, _ = run_cli(capsys, "cache", "list", "--store", str(filled))
    assert code == 0
    [first] = lines_with(out, "mm ", "cpu", "1024, float16")
    assert first.split()[1] == "mm-sourc"  # the first digits of its source's hash
    assert first.split()[5:7] == ["3", "1"]  # results, failed
    assert name(B) in first and "1.2500" in first
    [second] = lines_with(out, "cpu", "2048, float16")
    assert name(A) in second and "3.0000" in second
    [gemm] = lines_with(out, "gemm")
    assert "(float16[64,32])" in gemm and " mm " in gemm and "0.5000" in gemm
    assert len(lines_with(out, H100)) == 1

    code, out, _ = run_cli(capsys, "cache", "list", "--store", str(filled), "--kernel", "gemm", "--json")
    [listed] = json.loads(out)
    assert (listed["kernel"], listed["results"], listed["failed"]) == ("gemm", 2, 0)
    assert listed["picked"]["description"]["name"] == "mm" and listed["picked"]["ms_per_call"] == 0.5


def test_show_prints_every_candidate_of_each_key_like_the_autotune_table(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    code, out, _ = run_cli(capsys, "cache", "show", "mm", "--store", str(filled))
    assert code == 0
    assert out.count("AUTOTUNE mm(") == 3  # three keys: two on the CPU, one on the H100
    assert "AUTOTUNE mm(1024, float16) on NVIDIA H100 80GB HBM3 (sm_90): 1 candidates" in out
    # Each config without what all of its key's share, which the caption says once.
    assert "every candidate has stages=3" in out
    [picked] = lines_with(out, "BLOCK=64 warps=8 ", "1.2500")
    assert "100.0%" in picked and "wallclock" in picked and "ok, picked" in picked
    [slower] = lines_with(out, "BLOCK=32 warps=4 ", "2.0000")
    assert "62.5%" in slower and "picked" not in slower
    [failed] = lines_with(out, "BLOCK=4096 warps=4 ")
    assert "compile_error: CompilationError: arange's range must be a power of 2" in failed
    assert "(stored)" not in out  # every row is stored: saying so on each says nothing

    code, out, _ = run_cli(capsys, "cache", "show", "gemm", "--store", str(filled), "--json")
    [shown] = json.loads(out)["keys"]
    assert [(c["description"]["name"], c["picked"]) for c in shown["candidates"]] == [
        ("mm", True),
        ("addmm", False),
    ]


def test_show_or_list_of_an_unknown_kernel_lists_the_stored_ones(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    for command in ("show", "bmm"), ("list", "--kernel", "bmm"):
        code, _, err = run_cli(capsys, "cache", *command, "--store", str(filled))
        assert code == 2
        assert "no results of kernel 'bmm' are stored; stored kernels: gemm, mm" in err


def test_stats_counts_rows_keys_kernels_devices_toolchains_and_dates(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    with sqlite3.connect(filled) as db:  # one row stored a day earlier than the rest
        db.execute(
            "UPDATE results SET created = created - 86400 WHERE kernel = 'gemm' AND candidate = 'digest-mm'"
        )
    code, out, _ = run_cli(capsys, "cache", "stats", "--store", str(filled), "--json")
    assert code == 0
    stats = json.loads(out)
    assert (stats["store"], stats["rows"], stats["keys"], stats["failed"], stats["corrupt"]) == (
        str(filled),
        8,
        4,
        1,
        0,
    )
    assert stats["devices"] == [H100, "cpu"]
    assert stats["toolchains"] == [f"triton {NOW.triton}, torch {NOW.torch}, CUDA {NOW.cuda or 'none'}"]
    assert [(k["kernel"], k["keys"], k["results"], k["failed"]) for k in stats["kernels"]] == [
        ("gemm", 1, 2, 0),
        ("mm", 3, 6, 1),
    ]
    assert stats["bytes"] == filled.stat().st_size > 0
    assert 86400 - 60 < stats["newest"] - stats["oldest"] < 86400 + 60

    code, out, _ = run_cli(capsys, "cache", "stats", "--store", str(filled))
    assert "8 (1 failed)" in out and f"{H100}, cpu" in out and str(filled) in out
    day = time.strftime("%Y-%m-%d", time.gmtime(stats["oldest"]))
    assert re.search(rf"stored +{day} \d\d:\d\d UTC to ", out)


def tune_add(n: int = 1000) -> kernelpick.Autotuner:
    """A real tuning of two configs in Triton's interpreter, stored in the test's default store."""
    space = [triton.Config({"BLOCK": 16}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=4)]
    kernel = kernelpick.autotune(space, key=["n"])(add_kernel)
    x = torch.randn(n)
    kernel[grid_1d(n)](x, x, torch.empty(n), n)
    return kernel


def test_a_real_tuning_is_listed_and_shown_from_the_default_store(capsys: pytest.CaptureFixture[str]) -> None:
    kernel = tune_add()
    picked = name(kernel.last_tuning.best)
    code, out, _ = run_cli(capsys, "cache", "list")
    assert code == 0 and str(settings.cache_dir() / "results.sqlite3") in out
    [line] = lines_with(out, "add_kernel", "cpu", "1000, float32, float32, float32")
    assert picked in line and line.split()[7:9] == ["2", "0"]

    code, out, _ = run_cli(capsys, "cache", "show", "add_kernel")
    assert "AUTOTUNE add_kernel(1000, float32, float32, float32) on cpu (Triton interpreter" in out
    # Shown without what every config of the key shares, which the caption says.
    [shared] = re.findall(r"every candidate has (.*)", out)
    shown = " ".join(part for part in picked.split() if part not in shared.split())
    assert "ok, picked" in lines_with(out, shown + " ")[0]
    assert f"source {MEASUREMENT_VERSION}:" in out


def without_created(table: Path) -> str:
    return "\n".join(line for line in table.read_text().splitlines() if '"created":' not in line)


def test_export_import_export_gives_the_same_table(
    capsys: pytest.CaptureFixture[str], filled: Path, tmp_path: Path
) -> None:
    tune_add()  # the test's default store holds a real tuning; `filled` rows saved through the API
    for name, where in (("tuned", []), ("saved", ["--store", str(filled), "--device", "cpu"])):
        first, second, fresh = (
            tmp_path / f"{name}-1.json",
            tmp_path / f"{name}-2.json",
            tmp_path / f"{name}.sqlite3",
        )
        code, out, _ = run_cli(capsys, "cache", "export", str(first), *where)
        assert code == 0 and f"to {first}" in out and "for cpu (triton" in out
        code, out, _ = run_cli(capsys, "cache", "import", str(first), "--store", str(fresh))
        entries = len(json.loads(first.read_text())["entries"])
        assert code == 0 and f"imported {entries} entries for cpu" in out and str(fresh) in out
        code, _, _ = run_cli(capsys, "cache", "export", str(second), "--store", str(fresh))
        assert code == 0
        assert without_created(second) == without_created(first)
    assert len(json.loads((tmp_path / "saved-1.json").read_text())["entries"]) == 3  # mm twice, gemm


def test_export_names_what_to_choose_when_the_store_is_ambiguous(
    capsys: pytest.CaptureFixture[str], filled: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "table.json"
    code, _, err = run_cli(capsys, "cache", "export", str(out_file), "--store", str(filled))
    assert code == 2 and f"2 device models are stored ({H100}, cpu)" in err and "--device" in err
    assert not out_file.exists()
    code, out, _ = run_cli(
        capsys,
        "cache",
        "export",
        str(out_file),
        "--store",
        str(filled),
        "--device",
        "cpu",
        "--kernel",
        "gemm",
    )
    assert code == 0 and "wrote 1 entries" in out
    assert [e["kernel"] for e in json.loads(out_file.read_text())["entries"]] == ["gemm"]
    code, _, err = run_cli(
        capsys, "cache", "export", str(out_file), "--store", str(filled), "--kernel", "bmm"
    )
    assert code == 2 and "stored kernels: gemm, mm" in err


def test_import_of_a_file_that_is_not_a_table_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"entries": []}')
    code, _, err = run_cli(capsys, "cache", "import", str(bad))
    assert code == 2 and f"{bad} is not a kernelpick deployment table" in err


def stored_rows(path: Path) -> set[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return set(db.execute("SELECT key, candidate FROM results"))


CORRUPTIONS = [  # (key, candidate): an UPDATE that damages that row, and what verify must say of it
    (GEMM, "digest-addmm", "key_data = 'not json'", "key_data is not JSON"),
    (GEMM, "digest-mm", "status = 'timeout'", "status column says 'timeout', the result says 'ok'"),
    (
        key(1024, "torch.float16"),
        A.digest,
        "description = '[1, 2]'",
        "description is list, not a JSON object",
    ),
    (
        key(1024, "torch.float16"),
        B.digest,
        "median_ms = 9.5",
        "median_ms column says 9.5, the result says 1.25",
    ),
    (
        key(1024, "torch.float16"),
        C.digest,
        """result = '{"status": "fine"}'""",
        "result is not a benchmark result",
    ),
    (key(2048, "torch.float16"), A.digest, "key = 'feedface' || key", "the row is filed under key feedface"),
    (key(2048, "torch.float16"), B.digest, "kernel = 'bmm'", "kernel column says 'bmm', key_data says 'mm'"),
]


def test_verify_names_corrupt_rows_and_prune_corrupt_removes_exactly_those(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    SQLiteStore(filled).save(key(4096, "torch.float16"), configs((A, ok(5.0))), pick=A.digest)
    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(filled))
    assert code == 0 and "all 9 rows" in out and "are sound" in out
    with sqlite3.connect(filled) as db:
        for tuning_key, candidate, update, _ in CORRUPTIONS:
            db.execute(
                f"UPDATE results SET {update} WHERE key = ? AND candidate = ?", (tuning_key.digest, candidate)
            )
    sound = {
        (key(4096, "torch.float16").digest, A.digest),
        (key(1024, "torch.float16", device=H100).digest, A.digest),
    }

    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(filled))
    assert code == 1
    for _, candidate, _, problem in CORRUPTIONS:
        assert len(lines_with(out, candidate[:12], problem)) == 1, problem
    # The row filed under another key leaves its own key's pick naming no stored result.
    assert "7 of 9 rows are corrupt, and 1 pick names no stored result" in out
    assert "kernelpick cache prune --corrupt" in out
    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(filled), "--json")
    found = json.loads(out)
    assert code == 1 and len(found["corrupt"]) == 8 and found["integrity"] == [] and found["ok"] is False
    assert [c["table"] for c in found["corrupt"]].count("picks") == 1

    code, out, err = run_cli(capsys, "cache", "list", "--store", str(filled))
    assert (
        code == 0 and "7 corrupt rows and 1 pick" in err and "cache verify" in err and "4096, float16" in out
    )

    code, out, _ = run_cli(capsys, "cache", "prune", "--corrupt", "--dry-run", "--store", str(filled))
    assert (
        code == 0
        and "would remove 7 rows of " in out
        and " keys and 1 pick naming no stored result" in out
        and len(stored_rows(filled)) == 9
    )
    code, out, _ = run_cli(capsys, "cache", "prune", "--corrupt", "--store", str(filled))
    assert code == 0 and "removed 7 rows of " in out and "1 pick naming" in out
    assert stored_rows(filled) == sound
    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(filled))
    assert code == 0 and "all 2 rows" in out


def test_verify_reports_a_damaged_file_and_leaves_it_where_it_is(
    capsys: pytest.CaptureFixture[str], filled: Path, tmp_path: Path
) -> None:
    with sqlite3.connect(filled) as db:  # the index now claims another column: its entries no longer match
        db.execute("PRAGMA writable_schema=ON")
        db.execute(
            "UPDATE sqlite_schema SET sql = 'CREATE INDEX results_by_kernel ON results (status)' "
            "WHERE name = 'results_by_kernel'"
        )
    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(filled))
    assert code == 1 and "integrity check finds" in out and "missing from index results_by_kernel" in out
    assert "prune cannot mend a damaged file" in out

    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"these are not the bytes of a database\n" * 200)
    code, out, _ = run_cli(capsys, "cache", "verify", "--store", str(garbage), "--json")
    found = json.loads(out)
    assert code == 1 and found["ok"] is False and found["rows"] is None
    assert found["integrity"] == ["file is not a database"]
    assert garbage.read_bytes().startswith(b"these are not") and sorted(tmp_path.iterdir()) == [
        garbage,
        filled.parent,
    ]


def test_prune_stale_removes_rows_of_another_toolchain_or_measurement_version_only(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    store = SQLiteStore(filled)
    current = stored_rows(filled)
    old_toolchain, old_version = (
        key(1024, "torch.float16", toolchain=OLD),
        key(1024, source="measure-1:mm-source-hash"),
    )
    store.save(old_toolchain, configs((A, ok(1.0)), (B, ok(2.0))), pick=A.digest)
    store.save(old_version, configs((A, ok(1.0))), pick=A.digest)
    unverified = key(4096, kernel="gemm", source=f"{VERIFICATION_VERSION}:unverified")
    store.save(unverified, [extern("mm", ok(1.0))], pick="digest-mm")

    code, out, _ = run_cli(capsys, "cache", "prune", "--stale", "--store", str(filled))
    assert code == 0 and "removed 3 rows of 2 keys" in out
    assert stored_rows(filled) == current | {(unverified.digest, "digest-mm")}
    with sqlite3.connect(filled) as db:  # the removed keys' picks went with their rows
        picked = {k for (k,) in db.execute("SELECT key FROM picks")}
    assert (
        old_toolchain.digest not in picked
        and old_version.digest not in picked
        and unverified.digest in picked
    )


def test_prune_filters_combine_and_dry_run_removes_nothing(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    with sqlite3.connect(filled) as db:  # the 2048 key was tuned 40 days ago
        db.execute(
            "UPDATE results SET created = created - 40 * 86400 WHERE key = ?",
            (key(2048, "torch.float16").digest,),
        )
    every = stored_rows(filled)
    code, out, _ = run_cli(
        capsys, "cache", "prune", "--older-than", "30", "--dry-run", "--store", str(filled)
    )
    assert code == 0 and "would remove 2 rows of 1 key from" in out and "without --dry-run" in out
    assert stored_rows(filled) == every

    code, out, _ = run_cli(capsys, "cache", "prune", "--kernel", "mm", "--failed", "--store", str(filled))
    assert code == 0 and "removed 1 row of 1 key" in out
    assert every - stored_rows(filled) == {(key(1024, "torch.float16").digest, C.digest)}
    code, out, _ = run_cli(
        capsys, "cache", "prune", "--kernel", "gemm", "--older-than", "30", "--store", str(filled)
    )
    assert code == 0 and "nothing removed" in out
    code, out, _ = run_cli(capsys, "cache", "prune", "--older-than", "30", "--store", str(filled))
    assert code == 0 and "removed 2 rows of 1 key" in out and len(stored_rows(filled)) == 5


def test_prune_refuses_to_wipe_without_a_filter_and_all_wipes(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    code, _, err = run_cli(capsys, "cache", "prune", "--store", str(filled))
    assert code == 2 and "--kernel, --failed, --older-than, --stale, --corrupt, or --all" in err
    assert len(stored_rows(filled)) == 8
    code, _, err = run_cli(capsys, "cache", "prune", "--all", "--failed", "--store", str(filled))
    assert code == 2 and "give either --all or filters" in err
    code, _, err = run_cli(capsys, "cache", "prune", "--kernel", "bmm", "--store", str(filled))
    assert code == 2 and "stored kernels: gemm, mm" in err
    code, out, _ = run_cli(capsys, "cache", "prune", "--all", "--store", str(filled))
    assert code == 0 and "removed 8 rows of 4 keys" in out and stored_rows(filled) == set()
    with sqlite3.connect(filled) as db:
        assert db.execute("SELECT COUNT(*) FROM picks").fetchone() == (0,)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of this test's own, on loopback."""
    from tests.store.conftest import RedisServer  # here: only this test needs Redis

    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder)
    yield server.url
    server.kill()


def test_list_stats_and_export_read_a_redis_store_with_redis(
    capsys: pytest.CaptureFixture[str], redis_url: str, path: Path, tmp_path: Path
) -> None:
    from kernelpick.store.redis import RedisStore

    for store in (RedisStore(redis_url), SQLiteStore(path)):  # the same rows in both
        store.save(
            key(1024, "torch.float16"), configs((A, ok(2.0)), (B, ok(1.25)), (C, FAILED)), pick=B.digest
        )
        store.save(GEMM, [extern("mm", ok(0.5))], pick="digest-mm")
    code, out, _ = run_cli(capsys, "cache", "list", "--redis", redis_url)
    assert code == 0 and f"tuned keys in Redis at {redis_url}" in out
    [line] = lines_with(out, "mm ", "1024, float16")
    assert line.split()[5:7] == ["3", "1"] and name(B) in line and "1.2500" in line

    code, out, _ = run_cli(capsys, "cache", "stats", "--redis", redis_url, "--json")
    stats = json.loads(out)
    assert (stats["rows"], stats["keys"], stats["failed"], stats["bytes"]) == (4, 2, 1, None)

    from_redis, from_file = tmp_path / "redis.json", tmp_path / "file.json"
    assert run_cli(capsys, "cache", "export", str(from_redis), "--redis", redis_url)[0] == 0
    assert run_cli(capsys, "cache", "export", str(from_file), "--store", str(path))[0] == 0
    assert without_created(from_redis) == without_created(from_file)
    assert not (settings.cache_dir() / "results.sqlite3").exists()  # Redis was read, not the local store


def test_commands_on_a_missing_store_say_where_they_looked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "results.sqlite3"
    for command in ("list", "stats", "verify"):
        code, _, err = run_cli(capsys, "cache", command, "--store", str(missing))
        assert code == 2 and f"no result store at {missing}" in err and "KERNELPICK_CACHE_DIR" in err
    assert not missing.exists()


def test_store_is_the_old_name_of_cache_stats_and_prune(capsys: pytest.CaptureFixture[str]) -> None:
    tune_add()
    code, out, err = run_cli(capsys, "store")
    assert code == 0 and "kernelpick cache stats" in err and "add_kernel" in out and "2 (0 failed)" in out
    code, out, err = run_cli(capsys, "store", "--clear")
    assert code == 0 and "kernelpick cache prune" in err and "removed 2 rows of 1 key" in out
    code, out, _ = run_cli(capsys, "cache", "stats", "--json")
    assert json.loads(out)["rows"] == 0
    code, out, _ = run_cli(capsys, "cache", "list")
    assert code == 0 and "no results stored in" in out


def widest(out: str) -> int:
    """The longest line, less the one naming the store's file (a path is not broken)."""
    return max(len(line) for line in out.splitlines() if not line.startswith("tuned keys in"))


def test_keys_that_differ_only_in_strides_or_alignment_are_listed_and_reported_apart(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = kernelpick.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])(
        add_kernel
    )
    buffer = torch.randn(1001)
    for x in (buffer[:1000], buffer[1:]):  # the second starts 4 bytes off a 16-byte boundary
        kernel[grid_1d(1000)](x, x, torch.empty(1000), 1000)
    selector = kernelpick.Selector("matmul", [kernelpick.extern(torch.mm)])
    a = torch.randn(64, 32)
    for b in (torch.randn(32, 16), torch.randn(16, 32).t()):  # row-major, then column-major
        selector.tune(a, b)
    for width in ("80", "100"):
        monkeypatch.setenv("COLUMNS", width)
        code, out, _ = run_cli(capsys, "cache", "list")
        assert code == 0 and widest(out) <= int(width)
        # Two keys each, and what sets them apart said once: the misaligned pointers, the strides.
        assert [line.split()[0] for line in out.splitlines()[2:] if not line.startswith(" ")] == [
            "add_kernel",
            "add_kernel",
            "matmul",
            "matmul",
        ]
        assert out.count("x_ptr:-") == 1 and out.count("stride=[1,32]") == 1
        code, out, _ = run_cli(capsys, "report")
        assert code == 0 and widest(out) <= int(width)
        titles = [line for line in out.splitlines() if line.startswith("AUTOTUNE")]
        assert len(titles) == 4  # four keys, four tables
        reported = " ".join(out.split())
        assert "AUTOTUNE add_kernel(1000, float32, float32, float32, x_ptr:- y_ptr:-) on cpu" in reported
        assert "AUTOTUNE add_kernel(1000, float32, float32, float32) on cpu" in reported
        assert "AUTOTUNE matmul(float32[64, 32], float32[32, 16] stride=[1, 32]) on cpu" in reported
        assert "AUTOTUNE matmul(float32[64, 32], float32[32, 16]) on cpu" in reported


@pytest.mark.parametrize("width", [80, 100])
def test_list_and_show_fit_the_width_and_keep_each_config_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, filled: Path, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(capsys, "cache", "list", "--store", str(filled))
    assert code == 0 and widest(out) <= width
    [line] = lines_with(out, "mm ", "1024, float16", "1.2500")
    assert name(B) in line  # the pick, whole, on its key's line
    code, out, _ = run_cli(capsys, "cache", "show", "mm", "--store", str(filled))
    assert code == 0 and widest(out) <= width
    rows = [line for line in out.splitlines() if line.startswith("BLOCK=")]
    assert len(rows) == 6  # the candidates of the three keys, each on a line of its own
    for config in (A, B, C):  # its name whole, its cost and status beside it
        shown = name(config).removesuffix(" stages=3") + " "
        assert all(re.search(r" (ok|compile_error:)", line) for line in lines_with(out, shown))
    [failed] = lines_with(out, "BLOCK=4096")
    assert "compile_error:" in failed  # the status whole; its reason wraps under it
    assert "power of 2" in out


def test_a_key_whose_tuning_was_interrupted_is_listed_unfinished_and_not_exported(
    capsys: pytest.CaptureFixture[str], path: Path, tmp_path: Path
) -> None:
    store = SQLiteStore(path)
    store.save(key(1024, "torch.float16"), configs((A, ok(2.0)), (B, ok(1.0))), pick=B.digest)
    store.save(key(4096, "torch.float16"), configs((A, ok(2.0))))  # stopped before it picked
    store.save(key(8192, "torch.float16"), configs((C, FAILED)))  # nothing worked
    store.close()
    code, out, _ = run_cli(capsys, "cache", "list", "--store", str(path))
    assert "unfinished" in lines_with(out, "4096, float16")[0]
    assert "all failed" in lines_with(out, "8192, float16")[0]
    code, out, _ = run_cli(capsys, "cache", "export", str(tmp_path / "t.json"), "--store", str(path))
    assert code == 0 and "wrote 1 entries" in out and "2 keys left out" in out


DOCS = Path(__file__).resolve().parents[2] / "docs" / "ops-decisions.md"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A store of the selections `kernelpick.ops.mm` made on an H100 for bench/gemm_suite.py."""
    return store_of_suite(GEMM_SUITE_H100, tmp_path / "h100.sqlite3")


def test_show_of_a_selector_ends_with_its_decisions_per_m(
    capsys: pytest.CaptureFixture[str], suite: Path
) -> None:
    code, out, _ = run_cli(capsys, "cache", "show", "kernelpick.ops.mm", "--store", str(suite))
    assert code == 0 and out.count("AUTOTUNE kernelpick.ops.mm(") == 36
    decisions = out[out.index("DECISIONS") :]
    assert "AUTOTUNE" not in decisions  # after every key's candidates
    assert decisions.count(f"DECISIONS kernelpick.ops.mm on {H100} (sm_90)\nN=") == 6  # six (N, K)
    row = decisions.split("N=10240, K=8192")[1].splitlines()[2]
    assert row.split()[:6] == ["1", "triton_mm_decode", "0.0577", "torch.mm", "0.0714", "1.24×"]
    code, alone, _ = run_cli(
        capsys, "cache", "show", "kernelpick.ops.mm", "--store", str(suite), "--decisions"
    )
    assert alone == decisions
    code, out, _ = run_cli(capsys, "cache", "show", "kernelpick.ops.mm", "--store", str(suite), "--json")
    data = json.loads(out)
    assert len(data["keys"]) == 36 and len(data["decisions"]) == 6
    group = data["decisions"][0]
    assert group["shape"] == "N=4096, K=4096, bfloat16, B column-major"
    assert [d["m"] for d in group["decisions"]] == [1, 4, 16, 128, 2048, 8192]
    first = group["decisions"][0]
    assert first["pick"].startswith("triton_mm_decode BLOCK_M=1,") and first["versus"] == "torch.mm"
    assert first["roofline"]["bound"] == "memory" and first["roofline"]["peaks_of"] == "H100 SXM5 80GB"


def test_a_tuned_kernel_shows_decisions_only_when_asked(
    capsys: pytest.CaptureFixture[str], filled: Path
) -> None:
    code, out, _ = run_cli(capsys, "cache", "show", "mm", "--store", str(filled))
    assert code == 0 and "DECISIONS" not in out  # a tuned kernel's keys are values, not a product's sizes
    code, out, _ = run_cli(capsys, "cache", "show", "mm", "--store", str(filled), "--decisions")
    assert out.count("DECISIONS mm on ") == 2  # on the CPU and on the H100
    [row] = lines_with(out, "(1024, float16)", "1.2500")
    assert row.split()[2:7] == ["BLOCK=64", "warps=8", "stages=3", "1.2500", "BLOCK=32"]  # then the runner-up


@pytest.mark.parametrize("width", [80, 100])
def test_decisions_fit_the_width_a_row_per_m_and_piped_lines_are_not_padded(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, suite: Path, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(capsys, "cache", "show", "kernelpick.ops.mm", "--store", str(suite), "--decisions")
    lines = out.splitlines()
    assert code == 0 and max(len(line) for line in lines) <= width
    assert all(line == line.rstrip() for line in lines)
    rows = [line.split() for line in lines if re.match(r" *\d+  ", line)]
    assert [row[0] for row in rows] == ["1", "4", "16", "128", "2048", "8192"] * 6
    assert all(row[-1] in ("memory", "compute") and sum(c.endswith("%") for c in row) == 2 for row in rows)


def test_the_decisions_page_shows_what_the_command_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, suite: Path
) -> None:
    text = DOCS.read_text()
    command = "$ COLUMNS=100 kernelpick cache show kernelpick.ops.mm --decisions --store h100.sqlite3\n"
    shown = text.split(command, 1)[1].split("```", 1)[0]
    monkeypatch.setenv("COLUMNS", "100")
    _, out, _ = run_cli(capsys, "cache", "show", "kernelpick.ops.mm", "--decisions", "--store", str(suite))
    assert shown == out, "paste the command's output into docs/ops-decisions.md"


def test_show_says_what_ranks_a_selection_and_what_eager_calls_would_pick(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Issue 38 item 3: a selection measured on a GPU has device and host times; the table ranks by
    # device time and says under it what the eager ranking would run, with both figures.
    store = SQLiteStore(tmp_path / "results.db")
    selection = key(
        [1, "torch.bfloat16"], [], None, kernel="mm_select", device=H100, source=VERIFICATION_VERSION
    )

    def timed(device_ms: float, host_ms: float) -> BenchmarkResult:
        return BenchmarkResult("ok", TimingSummary.of([device_ms] * 5, timer="cudagraph").with_host(host_ms))

    rows = [
        CandidateResult("a" * 16, {"kind": "extern", "name": "torch.mm"}, timed(0.012, 0.006)),
        CandidateResult("b" * 16, {"kind": "template", "name": "mm BLOCK_M=16"}, timed(0.009, 0.020)),
    ]
    store.save(selection, rows, pick="b" * 16)
    code, out, _ = run_cli(capsys, "cache", "show", "mm_select", "--store", str(tmp_path / "results.db"))
    text = " ".join(out.split())
    assert code == 0 and "2 candidates, ranked by device time (graph)" in text
    assert (
        "ranked with the host in the loop (eager), torch.mm (device 0.0120 ms, host 0.0060 ms) would beat"
        in text
    )
