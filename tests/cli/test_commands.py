"""The `kernelpick` command: demo (JSON and tables), analyze and settings (`cache`: test_cache.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

import kernelpick
from kernelpick import settings
from kernelpick.cli import commands
from kernelpick.errors import CacheDirError


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = commands.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_json_twice_against_one_store_hits_the_cache(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    code, out, _ = run_cli(capsys, "demo", "--json", "--cache-dir", store)
    assert code == 0
    first = json.loads(out)
    code, out, _ = run_cli(capsys, "demo", "--json", "--cache-dir", store)
    second = json.loads(out)

    assert first["cache_hit"] is False and second["cache_hit"] is True
    for summary in (first, second):
        assert summary["interpreter"] is True and summary["device"] == "cpu"
        assert summary["n_configs"] == 9 and summary["n_failed"] == 1
        assert set(summary["best_config"]) == {"matmul_kernel", "add_kernel"}  # as the store names them
    assert first["best_config"] == second["best_config"]
    assert second["tuning_seconds"] < first["tuning_seconds"] / 3


def test_demo_tables_name_the_device_and_the_failed_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "demo", "--cache-dir", str(tmp_path))
    assert code == 0
    assert "AUTOTUNE matmul_kernel(M=32, N=32, K=32) on cpu (Triton interpreter" in out
    assert "compile_error" in out and "power of 2" in out
    # Why the failing config fails, in words, and what to look at next.
    assert "BLOCK_M=48 BLOCK_N=32 GROUP_M=8 warps=4 stages=3: compile_error; it fails on purpose" in out
    assert "a block of 48 rows is not one" in out
    assert f"measured now and stored in {tmp_path / 'results.sqlite3'}" in " ".join(out.split())
    assert "kernelpick cache show matmul_kernel --store" in out


@pytest.mark.parametrize("width", [80, 100])
def test_demo_fits_the_width_and_its_titles_name_kernels_as_cache_show_takes_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(capsys, "demo", "--cache-dir", str(tmp_path))
    assert code == 0 and max(len(line) for line in out.splitlines()) <= width
    rows = [line for line in out.splitlines() if line.startswith("BLOCK")]
    assert len(rows) == 9  # a line per config: no name is broken
    assert all("ok" in row or "compile_error:" in row for row in rows)  # each status whole, beside it
    titles = re.findall(r"^AUTOTUNE (\w+)\(", out, flags=re.MULTILINE)
    assert titles == ["matmul_kernel", "add_kernel"]
    for name in titles:
        code, shown, _ = run_cli(capsys, "cache", "show", name, "--store", str(tmp_path / "results.sqlite3"))
        assert code == 0 and f"AUTOTUNE {name}(" in shown


def test_demo_verbose_says_the_whole_reason_and_where_the_time_went(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "demo", "--verbose", "--cache-dir", str(tmp_path))
    assert code == 0
    assert "    arange's range must be a power of 2" in out  # the compiler's own words, whole
    [steps] = [line for line in out.splitlines() if line.startswith("matmul_kernel: 5 configs measured in")]
    assert "compile" in steps and "benchmark" in steps


def test_settings_lists_every_variable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "settings")
    assert code == 0
    for variable in ("KERNELPICK_CACHE_DIR", "KERNELPICK_PRINT", "KERNELPICK_COMPILE_WORKERS"):
        assert variable in out


def test_settings_shows_square_brackets_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "settings")
    [row] = [line for line in out.splitlines() if "KERNELPICK_REDIS_URL" in line]
    assert code == 0 and "(extra kernelpick[redis])." in row  # not taken for rich markup


def test_settings_masks_the_redis_password(capsys: pytest.CaptureFixture[str]) -> None:
    with settings.override(redis_url="redis://:hunter2@cache.example:6379/0"):
        code, out, _ = run_cli(capsys, "settings")
    assert code == 0 and "KERNELPICK_REDIS_URL" in out
    assert "hunter2" not in out and "***" in out


SOURCES = str(Path(__file__).resolve().parents[2] / "src")


def test_settings_shows_every_variable_and_marks_the_bad_ones() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kernelpick.cli", "settings"],
        env={
            "KERNELPICK_PRINT": "maybe",
            "KERNELPICK_REP_MS": "-1",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": SOURCES,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith(" KERNELPICK_")}
    assert list(rows) == [env for env, _, _ in settings.describe()]
    assert "bad: KERNELPICK_PRINT='maybe' is not a boolean" in rows["KERNELPICK_PRINT"]
    assert "bad: KERNELPICK_REP_MS='-1' must not be negative" in rows["KERNELPICK_REP_MS"]
    assert [env for env, row in rows.items() if "bad:" in row] == ["KERNELPICK_PRINT", "KERNELPICK_REP_MS"]
    assert "kernelpick: error: bad value of KERNELPICK_PRINT, KERNELPICK_REP_MS" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_setting_stops_another_command_with_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kernelpick.cli", "cache", "stats"],
        env={"KERNELPICK_PRINT": "maybe", "PATH": "/usr/bin:/bin", "PYTHONPATH": SOURCES},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("kernelpick: error: KERNELPICK_PRINT='maybe' is not a boolean")


def test_an_os_error_is_one_line_and_status_2_and_debug_shows_its_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(args: object) -> int:
        raise OSError(28, "No space left on device", "/cache/results.sqlite3")

    monkeypatch.setattr(commands, "_settings", disk_full)
    code, out, err = run_cli(capsys, "settings")
    assert (code, out) == (2, "")
    assert err == "kernelpick: error: [Errno 28] No space left on device: '/cache/results.sqlite3'\n"
    with pytest.raises(OSError, match="No space left"):
        commands.main(["--debug", "settings"])


def test_an_unusable_cache_dir_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    file = tmp_path / "cache"
    file.write_text("")
    with settings.override(cache_dir=file):
        code, _, err = run_cli(capsys, "cache", "stats")
        assert code == 2 and "Traceback" not in err
        assert err.startswith(f"kernelpick: error: KERNELPICK_CACHE_DIR={file} cannot be used")
        with pytest.raises(CacheDirError):
            commands.main(["--debug", "cache", "stats"])


EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "analyze_kernel.py")
AXPY_ARGS = ["--arg", "x_ptr=f32[4096]", "--arg", "y_ptr=f32[4096]", "--arg", "alpha=fp32", "--arg", "n=i32"]


def test_analyze_prints_each_argument(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "analyze", f"{EXAMPLE}:axpy", *AXPY_ARGS, "--arg", "BLOCK=1024")
    assert code == 0
    assert "kernel axpy: exact" in out
    assert [line.split() for line in out.splitlines()[1:]] == [
        ["x_ptr", "read"],
        ["y_ptr", "both"],
        ["alpha", "untouched"],
        ["n", "untouched"],
    ]


def test_analyze_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "analyze", f"{EXAMPLE}:axpy", *AXPY_ARGS, "--arg", "BLOCK=1024", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["mutated"] == ["y_ptr"] and data["certain"] is True


def test_analyze_missing_argument_and_bad_spec_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "analyze", f"{EXAMPLE}:axpy", *AXPY_ARGS)
    assert code == 2 and "missing `BLOCK`" in err
    code, _, err = run_cli(capsys, "analyze", f"{EXAMPLE}:axpy", "--arg", "x_ptr=f33[4]")
    assert code == 2 and "unknown element type `f33`" in err


def test_version_names_kernelpick_triton_and_torch(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        commands.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == (
        f"kernelpick {kernelpick.__version__} (triton {triton.__version__}, torch {torch.__version__}, "
        f"CUDA {torch.version.cuda or 'none'})\n"
    )


def test_help_lists_the_device_and_code_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        commands.main(["--help"])
    out = capsys.readouterr().out
    assert "device" in out and "the facts of each visible GPU" in out
    assert "code" in out and "print the source of a stored choice" in out
