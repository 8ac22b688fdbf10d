"""DRAM bandwidth measured on the GPU: once per device model, then read from the cache dir."""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import get_type_hints

import torch

from kernelpick import settings
from kernelpick.bench.timers import timing_events
from kernelpick.device import DeviceInfo
from kernelpick.errors import KernelpickError

_COPIES = 20
_SMALLEST_BUFFER = 256 * 2**20


@dataclass(frozen=True, slots=True)
class MeasuredBandwidth:
    """A device model's copy bandwidth, as measured once: GB/s, bytes per copy, when, under which torch."""

    device: str
    memory_gbps: float
    bytes_per_copy: int
    measured: float  # unix time
    torch: str


def bandwidth_path(device: DeviceInfo) -> Path:
    """Where the measurement of `device`'s model is kept: `<cache dir>/devices/<model>.json`.

    Raises:
        CacheDirError: the cache dir cannot be created or written.
    """
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device.name).strip("-").lower() or "device"
    return settings.cache_dir() / "devices" / f"{slug}.json"


def cached_bandwidth(device: DeviceInfo) -> MeasuredBandwidth | None:
    """The kept measurement of `device`'s model, or None (never measured, an unreadable file, or a
    cache dir that cannot be used)."""
    try:
        data = json.loads(bandwidth_path(device).read_text(encoding="utf-8"))
        fields = get_type_hints(MeasuredBandwidth).items()  # each field's value made its type, or refused
        found = MeasuredBandwidth(**{name: kind(data[name]) for name, kind in fields})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if found.device == device.name else None


def memory_bandwidth(device: DeviceInfo, *, again: bool = False) -> MeasuredBandwidth:
    """`device`'s copy bandwidth: the kept measurement of its model, or measured now and kept (in the
    cache dir, when it can be used).

    Args:
        device: a GPU (`kernelpick.device.describe(torch.device("cuda", i))`).
        again: measure even when a measurement is kept, and keep the new one.

    Raises:
        KernelpickError: `device` is not a GPU: the interpreter's bandwidth says nothing of one.
    """
    if device.interpreter or device.index is None:
        raise KernelpickError(
            f"cannot measure the DRAM bandwidth of {device.label}: it is measured on a CUDA GPU"
        )
    if not again and (kept := cached_bandwidth(device)) is not None:
        return kept
    buffer = max(_SMALLEST_BUFFER, 8 * device.l2_bytes)
    gbps = _copy_gbps(torch.device("cuda", device.index), buffer)
    found = MeasuredBandwidth(device.name, gbps, 2 * buffer, time.time(), torch.__version__)
    if settings.usable_cache_dir() is None:  # warned: measured again by the next process
        return found
    path = bandwidth_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as stream:
        stream.write(json.dumps(asdict(found), indent=2))
    Path(stream.name).replace(path)  # whole or not at all, for another process reading it
    return found


def _copy_gbps(where: torch.device, size: int) -> float:
    source = torch.empty(size, dtype=torch.uint8, device=where).fill_(1)
    target = torch.empty_like(source)
    with torch.cuda.device(where):
        for _ in range(3):  # clocks up, allocator warm
            target.copy_(source)
        ends = timing_events(_COPIES)
        for start, end in ends:
            start.record()
            target.copy_(source)
            end.record()
        torch.cuda.synchronize()
    milliseconds = float(statistics.median(start.elapsed_time(end) for start, end in ends))
    return 2 * size / (milliseconds * 1e-3) / 1e9
