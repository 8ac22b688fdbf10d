"""Roofline figures: achieved TFLOP/s and GB/s against the datasheet peaks of the device model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kernelpick.reports import device_peaks, load_report, roofline
from tests.reports.samples import write_gemm_log


@pytest.mark.parametrize(
    ("name", "model", "fp16", "bandwidth"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", 989.5, 3350),
        ("NVIDIA H100 PCIe", "H100 PCIe 80GB", 756.5, 2000),
        ("NVIDIA H100 NVL", "H100 NVL 94GB", 835.5, 3900),
        ("NVIDIA H200", "H200 SXM 141GB", 989.5, 4800),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 312, 2039),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312, 1935),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 312, 1555),
    ],
)
def test_device_names_as_torch_gives_them_find_their_datasheet_peaks(
    name: str, model: str, fp16: float, bandwidth: float
) -> None:
    peaks = device_peaks(name)
    assert peaks is not None and peaks.model == model
    assert peaks.fp16_tflops == fp16 and peaks.memory_gbps == bandwidth


def test_a_large_half_precision_product_is_compute_bound_on_an_h100() -> None:
    n = 4096
    found = roofline(2 * n**3, 3 * n * n * 2, 0.2, "NVIDIA H100 80GB HBM3", "float16")
    assert found is not None
    assert found.tflops == pytest.approx(687.19, rel=1e-4)
    assert found.compute_percent == pytest.approx(100 * 687.19 / 989.5, rel=1e-4)
    assert found.gbps == pytest.approx(503.3, rel=1e-3)
    assert found.memory_percent == pytest.approx(100 * 503.3 / 3350, rel=1e-3)
    assert found.bound == "compute" and found.roof_percent == pytest.approx(found.compute_percent)


def test_a_vector_add_is_memory_bound_and_float32_uses_the_fp32_or_tf32_peak() -> None:
    n = 2**26
    found = roofline(n, 12 * n, 0.5, "NVIDIA A100-SXM4-80GB", "float32")
    assert found is not None and found.peak_tflops == 19.5
    assert found.bound == "memory" and found.roof_percent == pytest.approx(found.memory_percent)
    assert found.gbps == pytest.approx(12 * n / 0.5e-3 / 1e9)
    tf32 = roofline(n, 12 * n, 0.5, "NVIDIA A100-SXM4-80GB", "float32", tf32=True)
    assert tf32 is not None and tf32.peak_tflops == 156


def test_an_unknown_device_has_achieved_figures_but_no_percentages() -> None:
    found = roofline(1e9, None, 1.0, "cpu", "float32")
    assert found is not None and found.tflops == pytest.approx(1.0)
    assert found.compute_percent is None and found.roof_percent is None and found.gbps is None
    assert device_peaks("cpu") is None
    assert roofline(None, None, 1.0, "NVIDIA H100 80GB HBM3", "float16") is None


def test_a_launch_bound_pick_is_placed_by_its_device_time_not_its_host_time(tmp_path: Path) -> None:
    tuned = load_report(write_gemm_log(tmp_path / "gemm.jsonl")).keys[0]
    winner = tuned.winner
    assert winner is not None and winner.result.timing is not None
    launch_bound = replace(winner.result, timing=winner.result.timing.with_host(10 * winner.result.median_ms))
    slow_host = replace(tuned, candidates=(replace(winner, result=launch_bound),))
    found = slow_host.roofline()
    assert found is not None and found.ms == winner.result.median_ms
    assert found.flops == tuned.flops and found.tflops == pytest.approx(
        tuned.flops / (found.ms * 1e-3) / 1e12
    )  # type: ignore[operator]
