"""The tuning log: one JSON line per tuning, from real tunings, safe to append from threads and processes."""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
from tests.reports.samples import SPACE
from tests.tune.kernels import add_kernel, grid_1d

import kernelpick
from kernelpick import settings
from kernelpick.reports import read_log, work
from kernelpick.select.log import append_line
from kernelpick.select.work import forget_work


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def tune(kernel: kernelpick.Autotuner, n: int) -> None:
    x = torch.randn(n)
    kernel[grid_1d(n)](x, x, torch.empty(n), n)


def test_each_tuning_appends_a_line_naming_its_key_device_candidates_and_winner(real_log: Path) -> None:
    first, second, selection = lines(real_log)
    assert [e["kind"] for e in (first, second, selection)] == ["autotune", "autotune", "select"]
    assert first["name"] == "add_kernel" and first["key"] == {
        "n": 1000,
        "dtypes": ["float32"] * 3,
        "specialized": "x_ptr:D y_ptr:D out_ptr:D",  # what Triton compiles for: 16-byte aligned pointers
    }
    assert second["key"]["n"] == 3000
    assert first["device"] == "cpu" and first["interpreter"] is True
    assert first["toolchain"] == {
        "triton": triton.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    assert first["seconds"] > 0 and first["from_store"] is False
    by_name = {c["name"]: c for c in first["candidates"]}
    assert len(by_name) == len(SPACE)
    assert first["best"].startswith("BLOCK=256 ")  # 16 times fewer programs than BLOCK=16
    assert by_name[first["best"]]["status"] == "ok"
    ok = by_name["BLOCK=16 warps=2 stages=3"]  # as every table names it
    assert ok["timing"]["timer"] == "wallclock" and ok["timing"]["runs"] >= 1
    assert ok["cost_ms"] == ok["timing"]["median_ms"] > 0
    assert ok["description"] == {
        "kwargs": {"BLOCK": 16},
        "num_warps": 2,
        "num_stages": 3,
        "num_ctas": 1,
        "maxnreg": None,
    }
    failed = by_name["BLOCK=48 warps=4 stages=3"]
    assert failed["status"] == "compile_error" and "power of 2" in failed["message"]
    assert failed["timing"] is None and failed["cost_ms"] is None
    assert "search" not in first and "flops" not in first


def test_a_selection_line_has_the_signature_reference_and_each_choice(real_log: Path) -> None:
    selection = lines(real_log)[2]
    assert selection["name"] == "add" and selection["best"] == "fast_add"
    assert selection["reference"] == "slow_add"
    spec = {"dtype": "float32", "size": [64, 64], "stride": [64, 1], "offset": 0, "aligned": True}
    assert selection["key"] == {"inputs": [spec, spec], "kwargs": {}, "user_key": None}
    assert selection["key_text"] == "(float32[64, 64], float32[64, 64])"
    assert [c["name"] for c in selection["candidates"]] == ["fast_add", "slow_add"]
    assert selection["candidates"][0]["description"]["kind"] == "extern"


def test_only_tunings_are_logged_and_a_tuning_from_the_store_says_so(tmp_path: Path) -> None:
    log = tmp_path / "tunings.jsonl"
    with settings.override(log_path=log):
        kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        tune(kernel, 500)
        tune(kernel, 500)  # tuned already: nothing to log
        again = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        tune(again, 500)  # a new kernel object: tuned from the store
    with settings.override(log_path=None):
        tune(again, 700)  # not logged: the setting is unset
    first, second = lines(log)
    assert first["from_store"] is False and second["from_store"] is True
    assert all(c["from_store"] for c in second["candidates"] if c["status"] == "ok")
    assert second["best"] == first["best"]


def test_the_work_registered_for_a_kernel_is_logged_with_each_tuning(tmp_path: Path) -> None:
    work("add_kernel", flops=lambda key: key["n"], bytes=lambda key: 12 * key["n"])
    try:
        with settings.override(log_path=tmp_path / "tunings.jsonl"):
            tune(kernelpick.autotune(SPACE, key=["n"])(add_kernel), 256)
    finally:
        forget_work("add_kernel")
    (entry,) = lines(tmp_path / "tunings.jsonl")
    assert entry["flops"] == 256 and entry["bytes"] == 12 * 256


def test_an_unwritable_log_costs_one_warning_and_never_fails_a_tuning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "tunings.jsonl"  # under a file: no folder can be made
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    with (
        settings.override(log_path=unwritable),
        caplog.at_level(logging.WARNING, logger="kernelpick.reports"),
    ):
        x = torch.randn(300)
        out = torch.empty(300)
        for n in (200, 300):
            kernel[grid_1d(n)](x, x, out, n)
    torch.testing.assert_close(out, 2 * x)
    warnings = [r for r in caplog.records if r.name == "kernelpick.reports"]
    assert len(warnings) == 1
    assert str(unwritable) in warnings[0].getMessage() and "cannot be written" in warnings[0].getMessage()


def test_a_searched_tuning_logs_its_search_trace(tmp_path: Path) -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], search="random")(add_kernel)
    with settings.override(log_path=tmp_path / "tunings.jsonl"):
        tune(kernel, 128)
    assert kernel.last_tuning is not None and kernel.last_tuning.search is not None
    (entry,) = lines(tmp_path / "tunings.jsonl")
    assert entry["search"] == kernel.last_tuning.search.to_dict()
    assert entry["search"]["strategy"] == "random"
    assert len(entry["search"]["evaluations"]) == len(SPACE)
    assert entry["key"] == {"n": 128, "dtypes": ["float32"] * 3, "specialized": "x_ptr:D y_ptr:D out_ptr:D"}


def _append_many(path: str, writer: int, count: int) -> None:
    for index in range(count):
        append_line(Path(path), json.dumps({"writer": writer, "index": index, "padding": "x" * 20_000}))


def test_lines_appended_at_once_by_processes_and_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "tunings.jsonl"
    spawn = multiprocessing.get_context("spawn")
    processes = [spawn.Process(target=_append_many, args=(str(path), writer, 150)) for writer in (0, 1)]
    threads = [threading.Thread(target=_append_many, args=(str(path), writer, 150)) for writer in (2, 3, 4)]
    for worker in [*processes, *threads]:
        worker.start()
    for worker in [*processes, *threads]:
        worker.join(timeout=60)
    assert all(p.exitcode == 0 for p in processes)
    written = lines(path)  # each line whole JSON: 20 KB lines, far over what one write keeps atomic by itself
    assert len(written) == 5 * 150
    for writer in range(5):
        assert [e["index"] for e in written if e["writer"] == writer] == list(range(150))


def test_reading_a_log_leaves_out_lines_that_are_not_tuning_lines(
    real_log: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = tmp_path / "tunings.jsonl"
    first = real_log.read_text().splitlines()[0]
    damaged.write_text(f'{first}\nnot json at all\n{first[: len(first) // 2]}\n{{"version": 99}}\n\n')
    with caplog.at_level(logging.WARNING, logger="kernelpick.reports"):
        entries = read_log(damaged)
    assert [e["name"] for e in entries] == ["add_kernel"]
    assert "3 lines that are not kernelpick tuning log lines were left out" in caplog.text
