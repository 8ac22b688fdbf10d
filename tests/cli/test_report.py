"""`kernelpick report`: per tuned key its candidates, from the tuning log and the store; JSON; PNG files."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import kernelpick
from kernelpick import settings
from kernelpick.cli import main
from tests.engine.test_record import tune
from tests.reports.samples import GEMM_SUITE_H100, SPACE, store_of_suite, write_gemm_log
from tests.tune.kernels import add_kernel


def report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["report", *args])
    captured = capsys.readouterr()
    return status, " ".join(captured.out.split()), captured.err


def report_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    status = main(["report", *args, "--json"])
    assert status == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_each_tuned_key_gets_its_table_of_candidates(
    real_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = report(capsys, "--log", str(real_log))
    assert status == 0
    assert "AUTOTUNE add_kernel(n=1000, float32, float32, float32) on cpu" in out
    assert "AUTOTUNE add_kernel(n=3000, float32, float32, float32) on cpu" in out
    assert "AUTOTUNE add(float32[64, 64], float32[64, 64]) on cpu" in out
    # No timing; the seconds its lowering took where the log has them; the reason.
    failed = r"BLOCK=48 warps=4 - - - - - - (?:\d+\.\d\d|-) compile_error"
    assert len(re.findall(failed, out)) == 2
    assert out.count("every candidate has stages=3") == 2  # said once a table, not on every row
    assert "fast_add" in out and "ok, picked" in out and "from the tuning log" in out


def test_a_kernel_named_is_the_only_one_reported(real_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = report(capsys, "add", "--log", str(real_log))
    assert status == 0 and "AUTOTUNE add(" in out and "add_kernel" not in out


def test_an_unknown_kernel_is_an_error_listing_the_tuned_ones(
    real_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = report(capsys, "matmul", "--log", str(real_log))
    assert status == 2
    assert f"nothing tuned as 'matmul' in the tuning log {real_log}; tuned there: add, add_kernel" in err


def test_with_nothing_to_read_it_says_how_to_get_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = report(capsys)
    assert status == 2 and "KERNELPICK_LOG is not set" in err and "--log PATH or --store PATH" in err
    status, _, err = report(capsys, "--log", "missing.jsonl")
    assert status == 2 and "no tuning log at missing.jsonl" in err


def test_json_has_every_candidate_with_its_status_timing_and_parameters(
    real_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = report_json(capsys, "add_kernel", "--log", str(real_log))
    assert [k["key"]["n"] for k in data["keys"]] == [1000, 3000]
    first = data["keys"][0]
    logged = json.loads(real_log.read_text().splitlines()[0])
    assert first["best"] == logged["best"] and first["source"] == "log" and first["tunings"] == 1
    candidates = first["candidates"]
    assert len(candidates) == len(SPACE)
    assert [c["status"] for c in candidates] == ["ok"] * 4 + ["compile_error"]  # fastest first, failures last
    costs = [c["cost_ms"] for c in candidates[:4]]
    assert costs == sorted(costs)
    assert candidates[0]["params"]["BLOCK"] == 256
    assert set(candidates[0]["params"]) == {"BLOCK", "num_warps", "num_stages", "num_ctas"}


def test_keys_only_in_the_store_are_reported_beside_the_logged_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    tune(kernel, 400)  # before the log was set: only in the store
    log = tmp_path / "tunings.jsonl"
    with settings.override(log_path=log):
        tune(kernel, 800)
        tune(kernelpick.autotune(SPACE, key=["n"])(add_kernel), 800)  # again, from the store
        data = report_json(capsys)  # KERNELPICK_LOG and the default store
    keys = {k["key_text"]: k for k in data["keys"]}
    assert set(keys) == {"(400, float32, float32, float32)", "(n=800, float32, float32, float32)"}
    stored, logged = keys["(400, float32, float32, float32)"], keys["(n=800, float32, float32, float32)"]
    assert stored["source"] == "store" and stored["best"].startswith("BLOCK=256")
    assert len(stored["candidates"]) == len(SPACE)
    assert logged["source"] == "log" and logged["tunings"] == 2
    only_store = report_json(capsys, "--store", str(settings.cache_dir() / "results.sqlite3"))
    assert sorted(k["source"] for k in only_store["keys"]) == ["store", "store"]


def test_search_traces_and_roofline_figures_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_gemm_log(tmp_path / "gemm.jsonl")
    data = report_json(capsys, "--log", str(log))
    big = next(k for k in data["keys"] if k["key"]["inputs"][0]["size"] == [4096, 4096])
    assert big["tunings"] == 4 and big["device"] == "NVIDIA H100 80GB HBM3"
    assert [s["strategy"] for s in big["searches"]] == ["exhaustive", "random", "random", "model"]
    assert big["searches"][0]["best_ms"] == min(c["cost_ms"] for c in big["candidates"] if c["cost_ms"])
    roof = big["roofline"]
    assert big["flops"] == 2 * 4096**3 and roof["peak_tflops"] == 989.5 and roof["bound"] == "compute"
    assert 50 < roof["compute_percent"] < 75  # the fake timings are 700 TFLOP/s at best, cuBLAS 8 % slower
    status, out, _ = report(capsys, "--log", str(log), "--top", "3")
    assert status == 0
    assert "search model: " in out and "% of the best known" in out and "TFLOP/s" in out
    assert "% of 989.5" in out and "H100 SXM5 80GB" in out
    assert "more candidates not shown (--top 0 shows all)" in out


def test_a_selectors_decisions_follow_its_keys_in_the_terminal_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_of_suite(GEMM_SUITE_H100, tmp_path / "h100.sqlite3")
    status, out, _ = report(capsys, "--store", str(store), "--top", "1")
    assert status == 0 and out.count("DECISIONS kernelpick.ops.mm on NVIDIA H100 80GB HBM3 (sm_90)") == 6
    assert out.index("DECISIONS") > out.rindex("AUTOTUNE")
    assert "N=10240, K=8192, bfloat16, B column-major M pick ms/call vs vs ms speedup % mem" in out
    assert "1 triton_mm_decode 0.0577 torch.mm 0.0714 1.24× 86.8% 0.3% 1.0 memory" in out
    data = report_json(capsys, "--store", str(store))
    assert [len(group["decisions"]) for group in data["decisions"]] == [6] * 6
    assert {d["roofline"]["bound"] for g in data["decisions"] for d in g["decisions"]} == {
        "memory",
        "compute",
    }


def distinct_colours(path: Path) -> int:
    with Image.open(path) as picture:
        return len(picture.convert("RGB").getcolors(maxcolors=2**24) or [])


def test_png_writes_each_plot_as_a_file(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_gemm_log(tmp_path / "tunings.jsonl")
    log.write_text(real_log.read_text() + log.read_text())
    status, out, _ = report(capsys, "--log", str(log), "--png", str(tmp_path / "plots"))
    assert status == 0
    written = sorted(p.name for p in (tmp_path / "plots").iterdir())
    kinds = [name.rsplit("-", 1)[1] for name in written]
    # add_kernel: two keys with a failure each; add: two choices of one kind; mm: two keys with searches
    assert kinds.count("configs.png") == 5 and kinds.count("failures.png") == 4
    assert kinds.count("parameters.png") == 4 and kinds.count("progress.png") == 2
    assert "kernelpick.ops.mm-roofline.png" in written and "add-roofline.png" not in written
    for name in written:
        assert f"wrote {tmp_path / 'plots' / name}" in out
        assert distinct_colours(tmp_path / "plots" / name) > 20


def test_plots_without_matplotlib_say_how_to_install_it(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    status, _, err = report(capsys, "--log", str(real_log), "--html", str(tmp_path / "report.html"))
    assert status == 2 and "pip install 'kernelpick[plot]'" in err
    assert not (tmp_path / "report.html").exists()


def test_a_log_appended_to_while_reporting_is_read_whole_lines_only(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "tunings.jsonl"
    shutil.copy(real_log, log)
    with log.open("a") as out:
        out.write('{"version": 1, "kind": "autotune", "name": "cut sh')  # a line still being written
    data = report_json(capsys, "--log", str(log))
    assert sorted({k["name"] for k in data["keys"]}) == ["add", "add_kernel"]
