"""The report's plots: what each draws, from real tunings and GPU-like GEMM selections with searches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpick.reports import load_report
from kernelpick.reports.data import TunedKey
from kernelpick.reports.plots import (
    STATUS_COLOURS,
    config_figure,
    failure_figure,
    parameter_figure,
    plots_of,
    progress_figure,
    roofline_figure,
)
from kernelpick.reports.search import parse_search
from tests.reports.samples import write_gemm_log


@pytest.fixture
def gemm_keys(tmp_path: Path) -> list[TunedKey]:
    return list(load_report(write_gemm_log(tmp_path / "gemm.jsonl")).keys)


def test_progress_has_one_curve_per_search_and_one_label_per_strategy(gemm_keys: list[TunedKey]) -> None:
    big = next(k for k in gemm_keys if "4096, 4096], float16[4096" in k.key_text)
    figure = progress_figure(big)
    assert figure is not None
    axes = figure.axes[0]
    _, labels = axes.get_legend_handles_labels()
    assert labels == ["exhaustive", "random (2 runs)", "model", f"best known {big.best_known_ms:.4g} ms"]
    curves = axes.get_lines()[:4]
    assert curves[1].get_color() == curves[2].get_color() != curves[3].get_color()  # the two random runs
    for curve in curves:
        best = list(curve.get_ydata())
        assert best == sorted(best, reverse=True) and best[-1] >= big.best_known_ms  # type: ignore[operator]
    assert axes.get_xlabel() == "seconds since the tuning began"


def test_a_trace_without_times_is_drawn_by_configs_timed_and_failures_never_count_as_best() -> None:
    trace = parse_search(
        {"strategy": "pattern", "trace": [[None, None], [None, 3.0], [None, 2.0], [None, 5.0]]}
    )
    assert trace is not None and not trace.timed
    assert trace.best_so_far() == [float("inf"), 3.0, 2.0, 2.0] and trace.best_ms == 2.0
    assert parse_search({"strategy": "x"}) is None and parse_search("exhaustive") is None


def test_parameters_that_vary_get_a_plot_each_and_a_library_choice_stays_out_of_them(
    gemm_keys: list[TunedKey],
) -> None:
    figure = parameter_figure(gemm_keys[0])
    assert figure is not None
    assert {axes.get_xlabel() for axes in figure.axes} == {
        "kind",
        "BLOCK_M",
        "BLOCK_N",
        "num_warps",
        "num_stages",
    }
    block_m = next(axes for axes in figure.axes if axes.get_xlabel() == "BLOCK_M")
    assert [t.get_text() for t in block_m.get_xticklabels()] == ["64", "128", "256"]


def test_failures_are_counted_by_status(gemm_keys: list[TunedKey]) -> None:
    tuned = gemm_keys[0]
    figure = failure_figure(tuned)
    assert figure is not None
    axes = figure.axes[0]
    assert [t.get_text() for t in axes.get_yticklabels()] == ["ok", "out_of_resources"]
    widths = [bar.get_width() for bar in axes.patches]
    assert widths == [sum(c.result.ok for c in tuned.candidates), 8]
    assert axes.patches[1].get_facecolor()[:3] == pytest.approx((0x9B / 255, 0x5D / 255, 0xE5 / 255))
    assert STATUS_COLOURS["out_of_resources"] == "#9b5de5"


def test_the_roofline_places_each_key_under_the_device_roofs(
    gemm_keys: list[TunedKey], real_log: Path
) -> None:
    figure = roofline_figure(gemm_keys)
    assert figure is not None
    _, labels = figure.axes[0].get_legend_handles_labels()
    assert "H100 SXM5 80GB: 989.5 TFLOP/s, 3350 GB/s" in labels
    assert len([label for label in labels if label.startswith("(float16[")]) == 2
    assert roofline_figure(list(load_report(real_log).keys)) is None  # no FLOPs or bytes known


def test_a_kernel_tuned_on_two_devices_gets_a_roofline_under_each_devices_roofs(tmp_path: Path) -> None:
    log = write_gemm_log(tmp_path / "gemm.jsonl")
    lines = log.read_text().splitlines()
    log.write_text(
        "\n".join([*lines, *(json.dumps({**json.loads(line), "device": "NVIDIA H200"}) for line in lines)])
    )
    rooflines = [plot for plot in plots_of(load_report(log)) if plot.name == "roofline"]
    assert sorted(plot.filename for plot in rooflines) == [
        "kernelpick.ops.mm-NVIDIA_H100_80GB_HBM3-roofline.png",
        "kernelpick.ops.mm-NVIDIA_H200-roofline.png",
    ]
    assert sorted(plot.title for plot in rooflines) == [
        "kernelpick.ops.mm on NVIDIA H100 80GB HBM3: roofline",
        "kernelpick.ops.mm on NVIDIA H200: roofline",
    ]
    h200 = [k for k in load_report(log).keys if k.device == "NVIDIA H200"]
    figure = roofline_figure(h200)
    assert figure is not None
    _, labels = figure.axes[0].get_legend_handles_labels()
    assert "H200 SXM 141GB: 989.5 TFLOP/s, 4800 GB/s" in labels


def test_a_key_where_nothing_worked_has_no_time_plot_but_its_failures(gemm_keys: list[TunedKey]) -> None:
    from dataclasses import replace

    from kernelpick.bench.result import BenchmarkResult

    failed = BenchmarkResult.failed("timeout", "took over 10 s")
    broken = replace(
        gemm_keys[0], candidates=tuple(replace(c, result=failed) for c in gemm_keys[0].candidates)
    )
    assert config_figure(broken) is None and parameter_figure(broken) is None
    figure = failure_figure(broken)
    assert figure is not None and [t.get_text() for t in figure.axes[0].get_yticklabels()] == ["timeout"]


def test_every_status_a_result_can_have_has_a_colour_of_its_own() -> None:
    from kernelpick.bench.result import STATUSES
    from kernelpick.reports.plots import STATUS_COLOURS

    assert STATUS_COLOURS.keys() == set(STATUSES)
    assert len(set(STATUS_COLOURS.values())) == len(STATUSES)


def test_a_long_title_is_broken_into_lines_that_fit_the_figure() -> None:
    from kernelpick.reports.plots import _figure, _title

    figure = _figure(8.0, 4.0)
    text = (  # ran off an 8-inch figure at "search p" on one line
        "matmul_kernel(M=2048, N=4096, K=4096, float16, float16, float16, stride_ak:1 stride_bn:1 "
        "stride_cn:1): search progress"
    )
    lines = _title(figure, text).splitlines()
    assert len(lines) == 2 and all(len(line) <= 8 * 11 for line in lines)
    assert " ".join(lines) == text
