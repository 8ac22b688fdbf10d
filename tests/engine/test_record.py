"""engine/record.py: AUTOTUNE tables people can read at a glance, and the tuning log: one JSON line per
tuning, from real tunings, safe to append from threads and processes."""

from __future__ import annotations

import io
import json
import logging
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from rich.console import Console, RenderableType

import kernelpick
from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.console import FittingTable
from kernelpick.device import DeviceInfo, describe
from kernelpick.engine.record import autotune_table
from kernelpick.files import append_line
from kernelpick.reports import read_log, work
from kernelpick.work import forget_work
from tests.reports.samples import SPACE
from tests.tune.kernels import add_kernel, grid_1d

CPU = describe(torch.device("cpu"))
H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)

COMPILER_ERROR = """CompilationError: at 2:41:
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                                         ^
arange's range must be a power of 2"""


def ok(median_ms: float, from_store: bool = False) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([median_ms]), from_store=from_store)


def render(table: RenderableType, width: int = 300) -> list[str]:
    console = Console(file=io.StringIO(), width=width)
    console.print(table)
    return [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]


def body(table: FittingTable) -> list[list[str]]:
    """The table's rows as (candidate, median, % of best, status) cells, at a width that has them all."""
    rows = FittingTable(table.columns, title=table.title)  # without the caption under the rows
    rows.rows = list(table.rows)
    lines = render(rows)
    header = next(i for i, line in enumerate(lines) if line.startswith("candidate"))
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines[header + 1 :]]


ROWS = [
    ("BLOCK=16", ok(2.0)),
    ("BLOCK=48", BenchmarkResult.failed("compile_error", COMPILER_ERROR)),
    ("BLOCK=32", ok(1.0)),
    ("BLOCK=128", BenchmarkResult.failed("runtime_error", "RuntimeError: launch failed")),
    ("BLOCK=64", ok(4.0, from_store=True)),
]


def test_fastest_first_failures_last_in_their_order() -> None:
    names = [row[0] for row in body(autotune_table("add", ROWS, CPU))]
    assert names == ["BLOCK=32", "BLOCK=16", "BLOCK=64", "BLOCK=48", "BLOCK=128"]


def test_median_and_share_of_the_best() -> None:
    rows = {row[0]: row[1:] for row in body(autotune_table("add", ROWS, CPU))}
    assert rows["BLOCK=32"][:2] == ["1.0000", "100.0%"]
    assert rows["BLOCK=16"][:2] == ["2.0000", "50.0%"]
    assert rows["BLOCK=64"][:2] == ["4.0000", "25.0%"]
    assert rows["BLOCK=48"][:2] == ["-", "-"]


def test_status_says_stored_and_why_a_candidate_failed() -> None:
    rows = {row[0]: row[-1] for row in body(autotune_table("add", ROWS, CPU))}
    assert rows["BLOCK=32"] == "ok"
    assert rows["BLOCK=64"] == "ok (stored)"
    assert rows["BLOCK=48"] == "compile_error: CompilationError: arange's range must be a power of 2"
    assert rows["BLOCK=128"] == "runtime_error: RuntimeError: launch failed"


def test_title_names_the_kernel_device_count_and_time() -> None:
    text = " ".join(" ".join(render(autotune_table("mm(M=1024)", ROWS, H100, seconds=1.234))).split())
    assert text.startswith("AUTOTUNE mm(M=1024) on NVIDIA H100 80GB HBM3 (sm_90): 5 candidates in 1.23 s")
    assert "not representative" in " ".join(render(autotune_table("add", ROWS, CPU)))


def test_square_brackets_in_names_keys_and_messages_are_shown_as_written() -> None:
    rows = [
        (
            "mm[tma] BLOCK=64",
            BenchmarkResult.failed("compile_error", "TypeError: [constexpr] [bold]x[/bold]"),
        ),
        ("[red]plain[/red]", ok(1.0)),
    ]
    lines = render(autotune_table("mm(float16[64, 64], [redis])", rows, CPU, note="see [link]"))
    text = "\n".join(lines)
    assert "AUTOTUNE mm(float16[64, 64], [redis]) on cpu" in text
    assert "mm[tma] BLOCK=64" in text and "[red]plain[/red]" in text
    assert "compile_error: TypeError: [constexpr] [bold]x[/bold]" in text and "see [link]" in text


def test_a_table_of_failures_only() -> None:
    rows = [("a", BenchmarkResult.failed("timeout", "no answer in 10 s"))]
    assert body(autotune_table("add", rows, CPU)) == [["a"] + ["-"] * 7 + ["timeout: no answer in 10 s"]]


def test_the_compile_seconds_are_shown_where_known() -> None:
    rows = [("a", BenchmarkResult.failed("timeout", "killed", compile_s=30.0)), *ROWS]
    compile_s = {row[0]: row[-2] for row in body(autotune_table("add", rows, CPU))}
    assert compile_s["a"] == "30.00" and compile_s["BLOCK=32"] == "-"


#: The demo's matmul on a CPU: configs named by five parameters, one failing with a long reason.
DEMO = [
    (f"BLOCK_K=16 BLOCK_M={m} BLOCK_N={n} GROUP_M=8 warps={w} stages={s}", ok(ms))
    for m, n, w, s, ms in (
        (32, 32, 8, 4, 7.8),
        (32, 32, 4, 3, 8.0),
        (16, 16, 8, 4, 28.2),
        (16, 16, 4, 3, 28.8),
    )
] + [
    (
        "BLOCK_K=16 BLOCK_M=48 BLOCK_N=32 GROUP_M=8 warps=4 stages=3",
        BenchmarkResult.failed("compile_error", COMPILER_ERROR),
    )
]


@pytest.mark.parametrize("width", [80, 100])
def test_the_table_fits_the_width_with_a_line_per_candidate_and_every_status_whole(width: int) -> None:
    table = autotune_table("matmul_kernel(M=32, N=32, K=32)", DEMO, CPU, 0.3, best=DEMO[0][0])
    lines = render(table, width)
    assert max(len(line) for line in lines) <= width
    header = next(line for line in lines if line.startswith("candidate"))
    assert "ms/call" in header and "status" in header  # what always stays
    rows = [line for line in lines if line.startswith("BLOCK_M=")]
    assert len(rows) == 5  # each on one line: names are not broken
    assert rows[0].startswith("BLOCK_M=32 BLOCK_N=32 warps=8 stages=4") and rows[0].endswith("ok, picked")
    assert rows[-1].endswith("compile_error:")  # the status whole; its reason wraps below it
    assert "arange's range must be a power of 2" in " ".join(" ".join(lines).split())
    assert "every candidate has BLOCK_K=16 GROUP_M=8" in lines
    if width == 100:  # room for the share of the best and the spread, not for the timer
        assert "% of best" in header and "± %" in header and "timer" not in header


def test_columns_go_in_their_order_as_the_console_narrows() -> None:
    table = autotune_table("add", ROWS, CPU)

    def header(width: int) -> list[str]:
        line = next(line for line in render(table, width) if line.startswith("candidate "))
        return [cell.strip() for cell in line.split("  ") if cell.strip()]

    every = [
        "candidate",
        "ms/call",
        "% of best",
        "host ms",
        "± %",
        "runs",
        "timer",
        "compile s",
        "status",
    ]
    assert header(300) == every
    assert header(100) == every
    assert header(90) == [c for c in every if c != "timer"]  # empty columns go first: no timer here
    assert header(80) == ["candidate", "ms/call", "% of best", "± %", "runs", "status"]
    assert header(60) == ["candidate", "ms/call", "% of best", "status"]
    assert header(40) == ["candidate", "ms/call", "status"]  # never fewer


def test_a_selection_and_a_tuned_kernel_are_recorded_alike(tmp_path: Path) -> None:
    # Issue 39: one record type. The README's loop over a tuned kernel's `last_tuning.results.items()`
    # raised AttributeError on a selector's `last_selection` (a tuple of rows) before.
    @kernelpick.autotune(
        configs=[kernelpick.Config({"BLOCK": 32}), kernelpick.Config({"BLOCK": 64})], key=["n"]
    )
    @triton.jit
    def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

    def added(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    selector = kernelpick.Selector(
        "sum", [kernelpick.extern(torch.add), kernelpick.extern(added)], cache=False
    )
    x, out = torch.randn(100), torch.empty(100)
    with settings.override(cache_dir=tmp_path, isolate="off"):
        copy[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
        selector(x, x)
    kernel, selection = copy.last_tuning, selector.last_selection
    assert kernel is not None and selection is not None and type(kernel) is type(selection)
    for record in (kernel, selection):
        for candidate, result in record.results.items():  # the README's loop, on both
            assert result.ok, (candidate, result.message)
        assert record.results[record.best] is record.winner.result
        assert [row.result for row in record.candidates] == list(record.results.values())
        json.dumps(record.to_dict())
    assert set(selection.results) == {"torch.add", "added"} and selection.best in selection.results
    assert {c.kwargs["BLOCK"] for c in kernel.results} == {32, 64} and kernel.best in kernel.results
    assert (kernel.kind, selection.kind) == ("autotune", "select")
    assert selection["added"].name == "added" and selection.summary().startswith("sum(")


def timed(device_ms: float, host_ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([device_ms]).with_host(host_ms))


#: A decode-sized selection: the Triton template is faster on the device and slower to launch.
LAUNCH_BOUND = [("torch.mm", timed(0.012, 0.006)), ("triton BLOCK=64", timed(0.009, 0.020))]


def test_the_title_says_what_ranked_and_a_line_what_the_other_way_would_pick() -> None:
    graph = render(autotune_table("mm(M=1)", LAUNCH_BOUND, H100, best="triton BLOCK=64"))
    text = " ".join(" ".join(graph).split())
    assert "2 candidates, ranked by device time (graph)" in text
    assert (
        "ranked with the host in the loop (eager), torch.mm (device 0.0120 ms, host 0.0060 ms) would beat "
        "triton BLOCK=64 (device 0.0090 ms, host 0.0200 ms)"
    ) in text
    eager = autotune_table("mm(M=1)", LAUNCH_BOUND, H100, best="torch.mm", measure="eager")
    text = " ".join(" ".join(render(eager)).split())
    assert "ranked by device or host time, the larger (eager)" in text
    assert "ranked by device time alone (graph), triton BLOCK=64 (device 0.0090 ms" in text
    rows = {row[0]: row[1:5] for row in body(eager)}
    assert rows["torch.mm"] == ["0.0120", "100.0%", "0.0120", "0.0060"]  # cost, share, device, host
    assert rows["triton BLOCK=64"] == ["0.0200", "60.0%", "0.0090", "0.0200"]


def test_without_host_times_the_title_names_no_ranking_and_no_line_is_added() -> None:
    text = " ".join(render(autotune_table("add", ROWS, H100, measure="eager")))
    assert "ranked by" not in text and "would beat" not in text
    agreeing = [("torch.mm", timed(0.009, 0.006)), ("triton", timed(0.012, 0.020))]
    assert "would beat" not in " ".join(render(autotune_table("mm", agreeing, H100)))


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
