"""Device facts on a real GPU: what torch reads matches the datasheet table, the measured DRAM
bandwidth is near the datasheet's, and the TMA template is eligible exactly on sm_90+."""

from __future__ import annotations

import json

import pytest
import torch

import kernelpick
from kernelpick import cli
from kernelpick.device import SHARED_MEMORY_BY_CAPABILITY, describe
from kernelpick.reports.bandwidth import cached_bandwidth, memory_bandwidth

pytestmark = pytest.mark.gpu


def test_the_facts_torch_reads_match_the_tables() -> None:
    info = describe(torch.device("cuda", 0))
    assert info.capability is not None and info.l2_bytes > 0 and info.multiprocessors > 0
    if info.capability in SHARED_MEMORY_BY_CAPABILITY:
        assert info.shared_memory_per_block == SHARED_MEMORY_BY_CAPABILITY[info.capability]
    peaks = info.peaks
    if peaks is None:
        pytest.skip(f"{info.name} is not in the datasheet table")
    assert info.multiprocessors == peaks.multiprocessors
    if "H100" in info.name or "H200" in info.name:
        assert info.capability == (9, 0) and info.big_gpu


def test_the_measured_dram_bandwidth_is_near_the_datasheets_and_kept() -> None:
    info = describe(torch.device("cuda", 0))
    measured = memory_bandwidth(info)
    assert cached_bandwidth(info) == measured
    peaks = info.peaks
    if peaks is None:
        pytest.skip(f"{info.name} is not in the datasheet table")
    # A copy reaches 80-90 % of the datasheet on an H100; a factor of two either way would be a bug.
    assert peaks.memory_gbps / 2 < measured.memory_gbps < peaks.memory_gbps * 1.05, measured


def test_kernelpick_device_json_has_every_fact(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["device", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert len(devices) == torch.cuda.device_count()
    first = devices[0]
    assert first["type"] == "cuda" and first["measured_memory_gbps"] > 0
    assert first["shared_memory_from"] == "device"


def test_the_tma_template_is_eligible_exactly_on_sm90_and_newer() -> None:
    a = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    record = kernelpick.ops.selector("mm").tune(a, b)
    names = {r.name for r in record.candidates}
    tma = any(name.startswith("triton_mm_tma") for name in names)
    if describe(a.device).capability >= (9, 0):  # type: ignore[operator]
        assert tma and record.skipped == ()
    else:
        assert not tma and [s.name for s in record.skipped] == ["triton_mm_tma"]
