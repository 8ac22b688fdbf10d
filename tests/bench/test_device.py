"""bench/device.py: what kernelpick knows of the device a kernel runs on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.bench.device import DeviceInfo, describe, device_of


def test_cpu_is_the_interpreter_and_says_its_timings_do_not_predict_a_gpu() -> None:
    cpu = describe(torch.device("cpu"))
    assert cpu.interpreter
    assert (cpu.name, cpu.capability, cpu.index) == ("cpu", None, None)
    assert "Triton interpreter" in cpu.label and "not representative" in cpu.label
    assert describe(torch.device("cpu")) is cpu  # read once


def test_a_gpu_label_names_the_model_and_architecture() -> None:
    gpu = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
    assert not gpu.interpreter
    assert gpu.label == "NVIDIA H100 80GB HBM3 (sm_90)"


def test_device_of_the_first_tensor_or_descriptor() -> None:
    x = torch.zeros(16, 16, device="meta")
    assert device_of([3, "a", x, torch.zeros(1)]) == torch.device("meta")
    assert device_of([None, TensorDescriptor.from_tensor(torch.zeros(16, 16), [8, 8])]) == torch.device("cpu")


def test_device_of_no_tensors_is_the_default_device() -> None:
    expected = (
        torch.device("cuda", torch.cuda.current_device())
        if torch.cuda.is_available()
        else torch.device("cpu")
    )
    assert device_of([1, 2.0]) == expected


def test_a_gpu_gives_its_opt_in_shared_memory_per_block_and_a_cpu_no_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No GPU here: torch's device properties stand in, with the figures an H100 reports.
    props = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        major=9,
        minor=0,
        L2_cache_size=50 * 2**20,
        multi_processor_count=132,
        shared_memory_per_block=49152,
        shared_memory_per_block_optin=232448,
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    describe.cache_clear()
    try:
        assert describe(torch.device("cuda", 0)).shared_memory_per_block == 232448
        del props.shared_memory_per_block_optin  # a torch without the opt-in figure (ROCm)
        assert describe(torch.device("cuda", 1)).shared_memory_per_block == 49152
    finally:
        describe.cache_clear()
    assert describe(torch.device("cpu")).shared_memory_per_block == 0
