"""reports/bandwidth.py: DRAM bandwidth measured once per device model and kept in the cache dir."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kernelpick import cli, settings
from kernelpick.device import DeviceInfo, describe
from kernelpick.errors import KernelpickError
from kernelpick.reports.bandwidth import bandwidth_path, cached_bandwidth, memory_bandwidth

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)


def keep(device: DeviceInfo, gbps: float, name: str | None = None) -> None:
    path = bandwidth_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"device": name or device.name, "memory_gbps": gbps, "bytes_per_copy": 2**30, "measured": 0.0}
    path.write_text(json.dumps({**data, "torch": torch.__version__}))


def test_a_kept_measurement_is_read_back_without_measuring_again() -> None:
    assert bandwidth_path(H100) == settings.cache_dir() / "devices" / "nvidia-h100-80gb-hbm3.json"
    assert cached_bandwidth(H100) is None
    keep(H100, 2900.5)
    kept = memory_bandwidth(H100)  # no GPU here: it would fail if it measured
    assert kept.memory_gbps == 2900.5 and kept.device == H100.name
    assert cached_bandwidth(H100) == kept


def test_a_damaged_file_or_another_models_measurement_is_not_used() -> None:
    keep(H100, 2900.5, name="NVIDIA H100 PCIe")
    assert cached_bandwidth(H100) is None
    bandwidth_path(H100).write_text("{not json")
    assert cached_bandwidth(H100) is None


def test_the_interpreter_has_no_dram_bandwidth_to_measure() -> None:
    with pytest.raises(KernelpickError, match="measured on a CUDA GPU"):
        memory_bandwidth(describe(torch.device("cpu")))


def test_measuring_again_measures_each_model_once_however_many_gpus_have_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a100 = DeviceInfo("cuda", 2, "NVIDIA A100-SXM4-80GB", (8, 0), 40 * 2**20, 108)
    keep(H100, 2900.5)  # an old measurement: --measure replaces it
    copies: list[torch.device] = []

    def copy_gbps(where: torch.device, size: int) -> float:
        copies.append(where)
        return 3000.0 + len(copies)

    monkeypatch.setattr("kernelpick.reports.bandwidth._copy_gbps", copy_gbps)
    gpus = [H100, replace(H100, index=1), a100]
    monkeypatch.setattr("kernelpick.cli.device.visible_devices", lambda: gpus)
    assert cli.main(["device", "--measure", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["devices"]
    assert copies == [torch.device("cuda", 0), torch.device("cuda", 2)]  # the second H100 reads the first's
    assert [f["measured_memory_gbps"] for f in facts] == [3001.0, 3001.0, 3002.0]


def test_an_unusable_cache_dir_measures_without_keeping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = tmp_path / "cache"
    file.write_text("")
    monkeypatch.setattr("kernelpick.reports.bandwidth._copy_gbps", lambda where, size: 3000.0)
    with settings.override(cache_dir=file):
        assert cached_bandwidth(H100) is None
        assert memory_bandwidth(H100).memory_gbps == 3000.0
    assert file.read_text() == ""
