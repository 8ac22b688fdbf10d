"""Facts about the devices kernels run on: what torch reads, datasheet peaks, what a choice requires."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

#: Registers one program (thread block) may use on every NVIDIA GPU since compute capability 3.0
#: (the CUDA programming guide's table of technical specifications).
REGISTERS_PER_BLOCK = 65536

#: The most shared memory one program may opt in to, by compute capability (the CUDA C++
#: programming guide, "Technical Specifications per Compute Capability": 96 KB on 7.0, 64 KB on
#: 7.5, 163 KB on 8.0 and 8.7, 99 KB on 8.6, 8.9 and 12.x, 227 KB on 9.0 and 10.x). Used when the
#: device itself cannot be asked (a device described from a store key or a recording).
SHARED_MEMORY_BY_CAPABILITY: dict[tuple[int, int], int] = {
    (7, 0): 98304,
    (7, 5): 65536,
    (8, 0): 166912,
    (8, 6): 101376,
    (8, 7): 166912,
    (8, 9): 101376,
    (9, 0): 232448,
    (10, 0): 232448,
    (10, 3): 232448,
    (12, 0): 101376,
}
#: For a capability missing from the table: the smallest figure of the GPUs since 8.6.
SHARED_MEMORY_FALLBACK = 101376
_warned_interpreter = False  # warn_once_if_interpreted has warned in this process

#: Inductor's "big GPU" gate (`torch._inductor.utils.is_big_gpu`): fewer SMs than an RTX 3080's 68
#: and its max-autotune GEMM templates are not worth their compile time.
BIG_GPU_MULTIPROCESSORS = 68


@dataclass(frozen=True, slots=True)
class DevicePeaks:
    """A device model's datasheet peaks: dense (no sparsity) tensor-core and CUDA-core compute, and
    memory bandwidth; `source` names the datasheet."""

    model: str  # as its datasheet names it
    fp16_tflops: float  # fp16 and bf16 on tensor cores, dense
    tf32_tflops: float  # tf32 on tensor cores, dense
    fp32_tflops: float  # fp32 without tensor cores
    memory_gbps: float  # HBM, GB/s (10^9 bytes)
    fp8_tflops: float | None = None  # fp8 on tensor cores, dense (None: no fp8 tensor cores)
    int8_tops: float | None = None  # int8 on tensor cores, dense, tera-operations per second
    fp64_tflops: float | None = None  # fp64 on tensor cores
    multiprocessors: int = 0  # SMs of the model
    source: str = ""

    def compute_tflops(self, dtype: str | None, tf32: bool = False) -> float | None:
        """The compute peak that bounds a kernel computing in `dtype` (None: no peak for it here)."""
        name = (dtype or "").removeprefix("torch.")
        if name in ("float16", "bfloat16"):
            return self.fp16_tflops
        if name == "float32":
            return self.tf32_tflops if tf32 else self.fp32_tflops
        if name.startswith("float8"):
            return self.fp8_tflops
        if name == "int8":
            return self.int8_tops
        if name == "float64":
            return self.fp64_tflops
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tflops": {
                "float16": self.fp16_tflops,
                "bfloat16": self.fp16_tflops,
                "tf32": self.tf32_tflops,
                "float32": self.fp32_tflops,
                "float8": self.fp8_tflops,
                "int8": self.int8_tops,
                "float64": self.fp64_tflops,
            },
            "memory_gbps": self.memory_gbps,
            "multiprocessors": self.multiprocessors,
            "source": self.source,
        }


# NVIDIA's datasheets give tensor-core figures "with sparsity" (FP64 aside): the dense peaks below are
# half of them.
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100)"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100)"
# H100 SXM: FP64 tensor core 67, TF32 989, BF16/FP16 1,979, FP8 and INT8 3,958 with sparsity, FP32
# 67 TFLOPS, 3.35 TB/s, 132 SMs. PCIe: 51, 756, 1,513, 3,026, FP32 51, 2 TB/s, 114 SMs. NVL: 60,
# 835, 1,671, 3,341, FP32 60, 3.9 TB/s, 132 SMs.
_H100_SXM = DevicePeaks("H100 SXM5 80GB", 989.5, 494.5, 67.0, 3350.0, 1979.0, 1979.0, 67.0, 132, _H100)
_H100_PCIE = DevicePeaks("H100 PCIe 80GB", 756.5, 378.0, 51.0, 2000.0, 1513.0, 1513.0, 51.0, 114, _H100)
_H100_NVL = DevicePeaks("H100 NVL 94GB", 835.5, 417.5, 60.0, 3900.0, 1670.5, 1670.5, 60.0, 132, _H100)
# H200 SXM: the H100 SXM's compute with 4.8 TB/s; NVL: the H100 NVL's compute with 4.8 TB/s.
_H200_SXM = DevicePeaks("H200 SXM 141GB", 989.5, 494.5, 67.0, 4800.0, 1979.0, 1979.0, 67.0, 132, _H200)
_H200_NVL = DevicePeaks("H200 NVL 141GB", 835.5, 417.5, 60.0, 4800.0, 1670.5, 1670.5, 60.0, 132, _H200)
# A100: BF16/FP16 312, TF32 156 and INT8 624 dense, FP64 tensor core 19.5, FP32 19.5 TFLOPS, no FP8;
# 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB 1,555 GB/s; 108 SMs.
_A100_SXM_80 = DevicePeaks("A100 SXM4 80GB", 312.0, 156.0, 19.5, 2039.0, None, 624.0, 19.5, 108, _A100)
_A100_PCIE_80 = DevicePeaks("A100 PCIe 80GB", 312.0, 156.0, 19.5, 1935.0, None, 624.0, 19.5, 108, _A100)
_A100_40 = DevicePeaks("A100 40GB", 312.0, 156.0, 19.5, 1555.0, None, 624.0, 19.5, 108, _A100)

#: Device names (as `torch.cuda.get_device_name` gives them, lower-cased) by the words they contain,
#: most specific first: "NVIDIA H100 80GB HBM3" is the SXM part, "NVIDIA H200" the SXM H200.
KNOWN_PEAKS: tuple[tuple[tuple[str, ...], DevicePeaks], ...] = (
    (("h100", "nvl"), _H100_NVL),
    (("h100", "pcie"), _H100_PCIE),
    (("h100",), _H100_SXM),
    (("h200", "nvl"), _H200_NVL),
    (("h200",), _H200_SXM),
    (("a100", "80gb", "pcie"), _A100_PCIE_80),
    (("a100", "80gb"), _A100_SXM_80),
    (("a100",), _A100_40),
)


def device_peaks(device: str) -> DevicePeaks | None:
    """The datasheet peaks of the device named `device` (e.g. "NVIDIA H100 80GB HBM3"), or None."""
    name = device.lower()
    for words, peaks in KNOWN_PEAKS:
        if all(word in name for word in words):
            return peaks
    return None


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What kernelpick needs to know about a device.

    `interpreter` is True for CPU devices: Triton kernels then run in Triton's interpreter and their
    timings say nothing about GPU performance. `shared_memory_per_block` is the most shared memory
    one program may opt in to (232,448 bytes on an H100), 0 where the device was not asked (CPUs, a
    device described from a store key): see `shared_memory_limit`.
    """

    type: str  # "cuda" or "cpu"
    index: int | None
    name: str  # e.g. "NVIDIA H100 80GB HBM3", or "cpu"
    capability: tuple[int, int] | None
    l2_bytes: int
    multiprocessors: int
    shared_memory_per_block: int = 0

    @property
    def interpreter(self) -> bool:
        return self.type != "cuda"

    @property
    def torch_device(self) -> torch.device:
        """The `torch.device` it is: "cuda:1", "cpu"."""
        return torch.device(self.type) if self.index is None else torch.device(self.type, self.index)

    @property
    def capability_text(self) -> str:
        """The compute capability as store keys and the tuning log write it: "9.0", "" when unknown."""
        return "" if self.capability is None else "{}.{}".format(*self.capability)

    @classmethod
    def recorded(cls, name: str, capability: str | None) -> DeviceInfo:
        """The device a store key or a log line names by model and `capability_text`: a GPU where
        `capability` is one ("9.0"), else a device run in Triton's interpreter (its name: "cpu"). Only
        what is recorded is known: no index, L2 size, SM count or shared memory."""
        major, _, minor = (capability or "").partition(".")
        if major.isdigit() and minor.isdigit():
            return cls("cuda", None, name, (int(major), int(minor)), 0, 0)
        return cls(name, None, name, None, 0, 0)

    @property
    def label(self) -> str:
        """Human-readable: "NVIDIA H100 80GB HBM3 (sm_90)" or "cpu (Triton interpreter)"."""
        if self.interpreter:
            return f"{self.name} (Triton interpreter; timings are not representative of a GPU)"
        major, minor = self.capability or (0, 0)
        return f"{self.name} (sm_{major}{minor})"

    @property
    def shared_memory_limit(self) -> int | None:
        """The shared memory one program may use: the device's own figure, else its compute
        capability's; None on CPUs (no limit)."""
        if self.interpreter:
            return None
        if self.shared_memory_per_block:
            return self.shared_memory_per_block
        if self.capability is None:
            return SHARED_MEMORY_FALLBACK
        return SHARED_MEMORY_BY_CAPABILITY.get(self.capability, SHARED_MEMORY_FALLBACK)

    @property
    def peaks(self) -> DevicePeaks | None:
        """The datasheet peaks of this device's model (None: a CPU or a model not in `KNOWN_PEAKS`)."""
        return None if self.interpreter else device_peaks(self.name)

    @property
    def big_gpu(self) -> bool:
        """Inductor's gate for its GEMM templates: a GPU with at least 68 SMs."""
        return not self.interpreter and self.multiprocessors >= BIG_GPU_MULTIPROCESSORS


@functools.cache
def describe(device: torch.device) -> DeviceInfo:
    """Facts about `device`, read once per process."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return DeviceInfo(
            type="cuda",
            index=index,
            name=props.name,
            capability=(props.major, props.minor),
            l2_bytes=int(getattr(props, "L2_cache_size", 0)) or 50 * 2**20,
            multiprocessors=props.multi_processor_count,
            shared_memory_per_block=_shared_memory_per_block(props),
        )
    return DeviceInfo(
        type=device.type, index=None, name=device.type, capability=None, l2_bytes=0, multiprocessors=0
    )


def _shared_memory_per_block(props: object) -> int:
    """The opt-in maximum (what Triton's kernels may ask for), else the default one; ROCm's torch
    has no opt-in figure."""
    optin = int(getattr(props, "shared_memory_per_block_optin", 0) or 0)
    return optin or int(getattr(props, "shared_memory_per_block", 0) or 0)


def visible_devices() -> list[DeviceInfo]:
    """Every GPU this process sees, or the CPU (Triton's interpreter) when it sees none."""
    if torch.cuda.is_available():
        return [describe(torch.device("cuda", i)) for i in range(torch.cuda.device_count())]
    return [describe(torch.device("cpu"))]


def device_of(values: Iterable[object]) -> torch.device:
    """The device of the first tensor among `values` (the default device when there is none)."""
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
        base = getattr(value, "base", None)  # a TensorDescriptor
        if isinstance(base, torch.Tensor):
            return base.device
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def capturing(values: Iterable[object]) -> bool:
    """Whether a CUDA graph is being captured on the current stream and a CUDA tensor is among
    `values` (work on it would be recorded into the graph, and a synchronization would break it)."""
    if not any(isinstance(v, torch.Tensor) and v.is_cuda for v in values):
        return False
    return bool(torch.cuda.is_current_stream_capturing())


@dataclass(frozen=True, slots=True)
class Requirements:
    """What a choice needs of the device, checked before anything compiles.

    A selector leaves out a choice whose requirements a device does not meet and records why
    (`TuningRecord.skipped`). Example: `Requirements(min_capability=(9, 0), tma=True)` for a
    kernel that reads through TMA descriptors.

    Args:
        gpu: needs a GPU: not run in Triton's interpreter.
        min_capability: the oldest compute capability it runs on (implies `gpu`).
        big_gpu: needs Inductor's "big GPU", at least 68 SMs (implies `gpu`).
        tma: needs host tensor descriptors (TMA): compute capability 9.0.
        min_shared_memory: bytes of shared memory one program needs.
    """

    gpu: bool = False
    min_capability: tuple[int, int] | None = None
    big_gpu: bool = False
    tma: bool = False
    min_shared_memory: int = 0

    def unmet(self, device: DeviceInfo) -> str | None:
        """Why `device` does not meet these requirements, or None when it does."""
        wants_gpu = self.gpu or self.big_gpu or self.tma or self.oldest_capability is not None
        if wants_gpu and device.interpreter:
            return f"needs a GPU with {self.text()}; this is the {device.name}, in Triton's interpreter"
        oldest = self.oldest_capability
        if oldest is not None and (device.capability is None or device.capability < oldest):
            have = (
                "of unknown capability" if device.capability is None else "sm_{}{}".format(*device.capability)
            )
            return f"needs sm_{oldest[0]}{oldest[1]} or newer; {device.name} is {have}"
        if self.big_gpu and not device.big_gpu:
            return (
                f"needs a big GPU (at least {BIG_GPU_MULTIPROCESSORS} SMs, as Inductor's is_big_gpu); "
                f"{device.name} has {device.multiprocessors}"
            )
        limit = device.shared_memory_limit
        if self.min_shared_memory and limit is not None and limit < self.min_shared_memory:
            return (
                f"needs {self.min_shared_memory:,} bytes of shared memory per program; "
                f"{device.name} allows {limit:,}"
            )
        return None

    @property
    def oldest_capability(self) -> tuple[int, int] | None:
        """The oldest compute capability that meets these requirements (TMA: 9.0), None: any."""
        wanted = [c for c in (self.min_capability, (9, 0) if self.tma else None) if c is not None]
        return max(wanted, default=None)

    def text(self) -> str:
        """The requirements in words: "sm_90+, TMA"."""
        oldest = self.oldest_capability
        parts = [] if oldest is None else ["sm_{}{}+".format(*oldest)]
        if self.tma:
            parts.append("TMA")
        if self.big_gpu:
            parts.append(f"{BIG_GPU_MULTIPROCESSORS}+ SMs")
        if self.min_shared_memory:
            parts.append(f"{self.min_shared_memory:,} bytes of shared memory")
        return ", ".join(parts) or "any GPU"


def warn_once_if_interpreted(device: DeviceInfo, name: str) -> None:
    """Warn, once per process, that `name` runs in Triton's interpreter when `device` is the CPU."""
    global _warned_interpreter
    if device.interpreter and not _warned_interpreter:
        _warned_interpreter = True
        # Under 100 columns for a kernel name of 20 characters: a log line is not wrapped.
        logging.getLogger("kernelpick.tune").warning(
            "no GPU: kernel `%s` runs in Triton's interpreter; timings do not represent a GPU", name
        )
