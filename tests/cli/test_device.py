"""cli/device.py: `kernelpick device` prints the facts of each visible device."""

from __future__ import annotations

import json

import pytest
import torch

from kernelpick import cli
from kernelpick.cli.device import device_facts
from kernelpick.device import DeviceInfo
from tests.reports.test_bandwidth import H100, keep

needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="prints the CPU case")


@needs_no_gpu
def test_without_a_gpu_it_says_kernels_run_in_the_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["device"]) == 0
    out = capsys.readouterr().out
    assert "No CUDA GPU is visible: Triton kernels run in Triton's interpreter on the CPU" in out
    assert "not representative" in out and "triton " in out and "torch " in out


@needs_no_gpu
def test_json_has_the_cpu_and_what_it_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["device", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["toolchain"]["cuda"] == torch.version.cuda
    (cpu,) = data["devices"]
    assert cpu["type"] == "cpu" and cpu["interpreter"] is True and cpu["cpu_cores"] >= 1
    assert cpu["templates"]["kernelpick_gemm"] is None
    assert "needs a GPU" in cpu["templates"]["kernelpick_gemm_tma"]


def test_a_gpus_facts_join_what_it_reports_the_datasheet_and_the_measurement() -> None:
    keep(H100, 2950.0)  # measured earlier: read back, not measured again
    facts = device_facts(H100)
    assert facts["capability"] == "9.0" and facts["multiprocessors"] == 132
    assert facts["shared_memory_per_block"] == 232448 and facts["shared_memory_from"] == "table by capability"
    assert facts["big_gpu"] is True and facts["measured_memory_gbps"] == 2950.0
    sheet = facts["datasheet"]
    assert sheet["model"] == "H100 SXM5 80GB" and sheet["memory_gbps"] == 3350.0
    assert sheet["tflops"]["bfloat16"] == 989.5 and "datasheet" in sheet["source"]
    assert facts["templates"] == {"kernelpick_gemm": None, "kernelpick_gemm_tma": None}
    old = DeviceInfo("cuda", 0, "Tesla V100-SXM2-16GB", (7, 0), 6 * 2**20, 80)
    keep(old, 800.0)
    facts = device_facts(old)
    assert facts["datasheet"] is None and facts["tma"] is False
    assert facts["templates"]["kernelpick_gemm_tma"] == "needs sm_90 or newer; Tesla V100-SXM2-16GB is sm_70"


def test_the_gpu_table_names_each_fact(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    keep(H100, 2950.0)
    monkeypatch.setattr("kernelpick.cli.device.visible_devices", lambda: [H100])
    assert cli.main(["device"]) == 0
    out = capsys.readouterr().out
    for text in (
        "cuda:0 NVIDIA H100 80GB HBM3",
        "9.0 (sm_90)",
        "232,448 bytes (table by capability)",
        "50 MiB",
        "2,950 GB/s",
        "H100 SXM5 80GB: NVIDIA H100 Tensor Core GPU datasheet",
        "bfloat16 989.5",
        "template kernelpick_gemm_tma",
    ):
        assert text in out


def test_a_bandwidth_that_cannot_be_measured_leaves_the_other_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(device: DeviceInfo, *, again: bool = False) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 400.00 MiB\nmore")

    monkeypatch.setattr("kernelpick.reports.bandwidth.memory_bandwidth", out_of_memory)
    facts = device_facts(H100)
    assert facts["measured_memory_gbps"] == "not measured: CUDA out of memory. Tried to allocate 400.00 MiB"
    assert facts["datasheet"]["memory_gbps"] == 3350.0
