"""Roofline figures: a timed call's achieved TFLOP/s and GB/s against its device's datasheet peaks."""

from __future__ import annotations

from dataclasses import dataclass

from kernelpick.device import DevicePeaks, device_peaks

# The peaks are `kernelpick.device`'s datasheet table; `kernelpick.reports` re-exports them from here.
__all__ = ["DevicePeaks", "Roofline", "device_peaks", "roofline"]


@dataclass(frozen=True, slots=True)
class Roofline:
    """What one call achieved: TFLOP/s and GB/s, and their share of the device's peaks when known.

    `roof_percent` compares the achieved TFLOP/s with the roof at the call's arithmetic intensity:
    the lower of the compute peak and intensity × bandwidth.
    """

    flops: float | None
    bytes: float | None
    ms: float  # device milliseconds per call
    peaks: DevicePeaks | None
    peak_tflops: float | None  # the compute peak for the call's dtype

    @property
    def tflops(self) -> float | None:
        return None if self.flops is None else self.flops / (self.ms * 1e-3) / 1e12

    @property
    def gbps(self) -> float | None:
        return None if self.bytes is None else self.bytes / (self.ms * 1e-3) / 1e9

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    @property
    def compute_percent(self) -> float | None:
        tflops = self.tflops
        return None if tflops is None or not self.peak_tflops else 100 * tflops / self.peak_tflops

    @property
    def memory_percent(self) -> float | None:
        gbps = self.gbps
        return None if gbps is None or self.peaks is None else 100 * gbps / self.peaks.memory_gbps

    @property
    def ridge(self) -> float | None:
        """The ridge point, FLOPs per byte: a call of lower intensity is bound by memory, of higher by
        compute (None without both peaks)."""
        if self.peak_tflops is None or self.peaks is None:
            return None
        return self.peak_tflops * 1e3 / self.peaks.memory_gbps

    @property
    def roof_tflops(self) -> float | None:
        """The roof at this call's intensity (None without both figures and both peaks)."""
        if self.intensity is None or self.peak_tflops is None or self.peaks is None:
            return None
        return min(self.peak_tflops, self.intensity * self.peaks.memory_gbps / 1e3)

    @property
    def roof_percent(self) -> float | None:
        roof, tflops = self.roof_tflops, self.tflops
        return None if roof is None or tflops is None else 100 * tflops / roof

    @property
    def bound(self) -> str | None:
        """Which peak is the roof at this intensity: "compute" or "memory"."""
        roof = self.roof_tflops
        if roof is None:
            return None
        return "compute" if roof == self.peak_tflops else "memory"

    def to_dict(self) -> dict[str, float | str | None]:
        return {
            "flops": self.flops,
            "bytes": self.bytes,
            "ms": self.ms,
            "tflops": self.tflops,
            "gbps": self.gbps,
            "intensity": self.intensity,
            "peak_tflops": self.peak_tflops,
            "peak_gbps": None if self.peaks is None else self.peaks.memory_gbps,
            "compute_percent": self.compute_percent,
            "memory_percent": self.memory_percent,
            "roof_percent": self.roof_percent,
            "ridge": self.ridge,
            "bound": self.bound,
            "peaks_of": None if self.peaks is None else self.peaks.model,
        }


def roofline(
    flops: float | None, moved: float | None, ms: float, device: str, dtype: str | None, *, tf32: bool = False
) -> Roofline | None:
    """The roofline figures of a call taking `ms` milliseconds (None when neither figure is known).

    Args:
        flops: floating-point operations of one call.
        moved: bytes read and written by one call.
        ms: device milliseconds one call takes.
        device: the device model's name.
        dtype: the dtype the call computes in (picks the compute peak).
        tf32: float32 products run on TF32 tensor cores.
    """
    if (flops is None and moved is None) or ms <= 0:
        return None
    peaks = device_peaks(device)
    peak = None if peaks is None else peaks.compute_tflops(dtype, tf32)
    return Roofline(flops, moved, ms, peaks, peak)
