"""device.py: what kernelpick knows of the device a kernel runs on, and what choices need of it."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.device import (
    SHARED_MEMORY_FALLBACK,
    DeviceInfo,
    Requirements,
    describe,
    device_of,
    visible_devices,
)


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


def test_a_device_named_by_a_store_key_or_log_line_is_rebuilt_from_its_model_and_capability() -> None:
    gpu = DeviceInfo.recorded("NVIDIA H100 80GB HBM3", "9.0")
    assert (gpu.type, gpu.capability, gpu.label) == ("cuda", (9, 0), "NVIDIA H100 80GB HBM3 (sm_90)")
    assert gpu.capability_text == "9.0"  # what keys and log lines hold: it reads back as it was written
    cpu = DeviceInfo.recorded("cpu", "")
    assert cpu.interpreter and cpu.capability is None and cpu.capability_text == ""
    assert DeviceInfo.recorded("cpu", None) == cpu  # a log line's null capability
    assert DeviceInfo.recorded("odd", "9.x").interpreter  # not a capability: nothing is made up


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


H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
A100 = DeviceInfo("cuda", 0, "NVIDIA A100-SXM4-80GB", (8, 0), 40 * 2**20, 108)
SMALL = DeviceInfo("cuda", 0, "NVIDIA GeForce RTX 3060", (8, 6), 3 * 2**20, 28)
CPU = DeviceInfo("cpu", None, "cpu", None, 0, 0)


def test_the_shared_memory_limit_is_the_devices_own_else_its_capabilitys_and_none_on_a_cpu() -> None:
    asked = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132, 200000)
    assert asked.shared_memory_limit == 200000
    assert H100.shared_memory_limit == 232448  # described from a store key: the sm_90 figure
    assert A100.shared_memory_limit == 166912 and SMALL.shared_memory_limit == 101376
    assert DeviceInfo("cuda", 0, "future", (13, 0), 0, 200).shared_memory_limit == SHARED_MEMORY_FALLBACK
    assert CPU.shared_memory_limit is None


def test_a_device_knows_its_datasheet_peaks_per_dtype_and_whether_it_is_a_big_gpu() -> None:
    peaks = H100.peaks
    assert peaks is not None and peaks.model == "H100 SXM5 80GB" and "H100" in peaks.source
    assert peaks.multiprocessors == H100.multiprocessors
    assert peaks.compute_tflops("torch.bfloat16") == 989.5 and peaks.compute_tflops("float8_e4m3fn") == 1979
    assert peaks.compute_tflops("int8") == 1979 and peaks.compute_tflops("float64") == 67
    a100 = A100.peaks
    assert a100 is not None and a100.compute_tflops("float8_e5m2") is None  # no fp8 tensor cores
    assert CPU.peaks is None and SMALL.peaks is None
    assert H100.big_gpu and A100.big_gpu and not SMALL.big_gpu and not CPU.big_gpu


def test_the_cpu_is_the_only_visible_device_without_a_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert visible_devices() == [describe(torch.device("cpu"))]


def test_requirements_say_why_a_device_falls_short() -> None:
    hopper = Requirements(min_capability=(9, 0))
    assert hopper.unmet(H100) is None
    assert hopper.unmet(A100) == "needs sm_90 or newer; NVIDIA A100-SXM4-80GB is sm_80"
    assert hopper.unmet(CPU) == "needs a GPU with sm_90+; this is the cpu, in Triton's interpreter"
    assert Requirements(tma=True).unmet(A100) == hopper.unmet(A100)  # TMA implies sm_90
    big = Requirements(big_gpu=True)
    assert big.unmet(A100) is None
    assert big.unmet(SMALL) == (
        "needs a big GPU (at least 68 SMs, as Inductor's is_big_gpu); NVIDIA GeForce RTX 3060 has 28"
    )
    shared = Requirements(min_shared_memory=200_000)
    assert shared.unmet(H100) is None and "allows 166,912" in str(shared.unmet(A100))
    assert shared.unmet(CPU) is None  # no limit in the interpreter
    assert Requirements().unmet(CPU) is None and Requirements(gpu=True).unmet(CPU) is not None
    assert Requirements(min_capability=(9, 0), tma=True, big_gpu=True).text() == "sm_90+, TMA, 68+ SMs"


def test_the_interpreter_warning_fits_a_terminal_of_100_columns(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make demo` at COLUMNS=100 printed it as a 141-column line (log lines are not wrapped).
    import kernelpick.device as device_module

    monkeypatch.setattr(device_module, "_warned_interpreter", False)
    with caplog.at_level(logging.WARNING, logger="kernelpick.tune"):
        device_module.warn_once_if_interpreted(device_module.describe(torch.device("cpu")), "a" * 20)
    assert len(caplog.records) == 1 and len(caplog.records[0].getMessage()) <= 100
