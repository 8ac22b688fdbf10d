"""Roofline figures: achieved TFLOP/s and GB/s of a timed call against its device's peaks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DevicePeaks:
    """A device model's datasheet peaks: dense (no sparsity) tensor-core and CUDA-core compute, and
    memory bandwidth."""

    model: str  # as its datasheet names it
    fp16_tflops: float  # fp16 and bf16 on tensor cores, dense
    tf32_tflops: float  # tf32 on tensor cores, dense
    fp32_tflops: float  # fp32 without tensor cores
    memory_gbps: float  # HBM, GB/s (10^9 bytes)

    def compute_tflops(self, dtype: str | None, tf32: bool = False) -> float | None:
        """The compute peak that bounds a kernel computing in `dtype` (None: no peak for it here)."""
        name = (dtype or "").removeprefix("torch.")
        if name in ("float16", "bfloat16"):
            return self.fp16_tflops
        if name == "float32":
            return self.tf32_tflops if tf32 else self.fp32_tflops
        return None


# NVIDIA's datasheets give tensor-core figures "with sparsity": the dense peaks below are half of them.
# H100: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100). SXM: BF16/FP16
# 1,979 and TF32 989 TFLOPS with sparsity, FP32 67 TFLOPS, 3.35 TB/s; PCIe: 1,513 and 756, FP32 51,
# 2 TB/s; NVL: 1,671 and 835, FP32 60, 3.9 TB/s.
_H100_SXM = DevicePeaks("H100 SXM5 80GB", 989.5, 494.5, 67.0, 3350.0)
_H100_PCIE = DevicePeaks("H100 PCIe 80GB", 756.5, 378.0, 51.0, 2000.0)
_H100_NVL = DevicePeaks("H100 NVL 94GB", 835.5, 417.5, 60.0, 3900.0)
# H200: NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200). SXM: 1,979 and 989 TFLOPS with
# sparsity, FP32 67 TFLOPS, 4.8 TB/s; NVL: 1,671 and 835, FP32 60, 4.8 TB/s.
_H200_SXM = DevicePeaks("H200 SXM 141GB", 989.5, 494.5, 67.0, 4800.0)
_H200_NVL = DevicePeaks("H200 NVL 141GB", 835.5, 417.5, 60.0, 4800.0)
# A100: NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100): BF16/FP16 312 and
# TF32 156 TFLOPS dense, FP32 19.5 TFLOPS; 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB 1,555 GB/s.
_A100_SXM_80 = DevicePeaks("A100 SXM4 80GB", 312.0, 156.0, 19.5, 2039.0)
_A100_PCIE_80 = DevicePeaks("A100 PCIe 80GB", 312.0, 156.0, 19.5, 1935.0)
_A100_40 = DevicePeaks("A100 40GB", 312.0, 156.0, 19.5, 1555.0)

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
