"""Facts about the device a kernel runs on: model, compute capability, L2 size, limits, interpreter or not."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

import torch

#: Registers one program (thread block) may use on every NVIDIA GPU since compute capability 3.0
#: (the CUDA programming guide's table of technical specifications).
REGISTERS_PER_BLOCK = 65536


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What kernelpick needs to know about a device.

    `interpreter` is True for CPU devices: Triton kernels then run in Triton's interpreter and their
    timings say nothing about GPU performance. `shared_memory_per_block` is the most shared memory
    one program may opt in to (232,448 bytes on an H100), 0 where unknown (CPUs): no limit.
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
    def label(self) -> str:
        """Human-readable: "NVIDIA H100 80GB HBM3 (sm_90)" or "cpu (Triton interpreter)"."""
        if self.interpreter:
            return f"{self.name} (Triton interpreter; timings are not representative of a GPU)"
        major, minor = self.capability or (0, 0)
        return f"{self.name} (sm_{major}{minor})"


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
