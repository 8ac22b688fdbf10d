"""The fp8 templates' config spaces (`scaled_mm`): small-M tiles, large tiles, persistent TMA."""

from __future__ import annotations

import torch

from kernelpick.config import Config
from kernelpick.engine.signature import Signature
from kernelpick.ops.gemm_configs import GemmProblem, Tile, shared_memory_bytes
from kernelpick.tensors import TensorSpec

# Tiles as the GEMM spaces' (`gemm_configs.Tile`), with deeper K: an fp8 element is one byte, so a
# 128-deep tile reads 128 bytes a row, what a 16-bit tile reads at 64. `_configs` clamps them to the
# problem (BLOCK_K to no less than `MIN_BLOCK_K`) and leaves out what would not fit in shared memory,
# before anything is compiled.

#: For M up to 128 (decode, small batches): thin tiles along M, wide along K to stream the weights.
SMALL_M: tuple[Tile, ...] = (
    (16, 32, 256, 4, 4),  # narrow N: enough programs to stream the weights at small N
    (16, 32, 512, 3, 4),
    (16, 64, 256, 4, 4),
    (16, 64, 512, 3, 4),
    (16, 128, 128, 4, 4),
    (16, 128, 256, 3, 4),
    (32, 64, 256, 4, 4),
    (32, 128, 128, 4, 4),
    (32, 128, 256, 3, 4),
    (64, 64, 256, 4, 4),
    (64, 128, 128, 4, 4),
    (64, 128, 256, 3, 8),
    (64, 256, 128, 3, 8),
)
#: For every M: medium and large tiles, up to 128x256x128 and 256x128x128 with 8 warps.
GENERAL: tuple[Tile, ...] = (
    (64, 128, 128, 4, 4),
    (128, 64, 128, 4, 4),
    (128, 128, 64, 4, 4),
    (128, 128, 128, 3, 8),
    (128, 128, 128, 4, 8),
    (128, 256, 64, 4, 8),
    (128, 256, 128, 3, 8),
    (256, 128, 128, 3, 8),
    (256, 64, 128, 4, 8),
)
#: The persistent TMA kernel (compute capability 9.0 and newer), for M of 64 and more.
PERSISTENT: tuple[Tile, ...] = (
    (128, 256, 128, 3, 8),
    (128, 256, 128, 4, 8),
    (256, 128, 128, 3, 8),
    (128, 128, 128, 4, 8),
    (128, 128, 128, 5, 4),
    (64, 128, 128, 4, 4),
    (64, 256, 128, 4, 8),
)
#: Triton's interpreter: two small configs, enough to exercise the template on a CPU (K = 48 is not
#: a multiple of either BLOCK_K, so the masked K loop runs).
INTERPRETED: tuple[Tile, ...] = ((16, 16, 32, 2, 4), (32, 32, 64, 2, 4))

GROUP_M = 8
FP8 = torch.float8_e4m3fn
#: fp8 tensor-core instructions: sm_89 (Ada) and newer; torch._scaled_mm asks the same.
MIN_CAPABILITY = (8, 9)
#: The K of one fp8 MMA instruction: the least BLOCK_K.
MIN_BLOCK_K = 32


def _ceil_pow2(value: int) -> int:
    return 1 << max(0, value - 1).bit_length()


def _clamp(tile: Tile, problem: GemmProblem) -> Tile:
    block_m, block_n, block_k, stages, warps = tile
    return (
        min(block_m, max(16, _ceil_pow2(problem.m))),
        min(block_n, max(16, _ceil_pow2(problem.n))),
        min(block_k, max(MIN_BLOCK_K, _ceil_pow2(problem.k))),
        stages,
        warps,
    )


def _configs(tiles: tuple[Tile, ...], problem: GemmProblem) -> list[Config]:
    budget = problem.device.shared_memory_limit
    seen: set[Tile] = set()
    configs = []
    for raw in tiles:
        tile = _clamp(raw, problem)
        if tile in seen:
            continue
        seen.add(tile)
        if budget is not None and shared_memory_bytes(tile, 1) > budget:
            continue
        block_m, block_n, block_k, stages, warps = tile
        kwargs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": GROUP_M}
        configs.append(Config(kwargs, num_warps=warps, num_stages=stages))
    return configs


def _supported(problem: GemmProblem) -> bool:
    """fp8 A and B, no empty dimension, and a device with fp8 tensor cores (or the interpreter)."""
    if problem.a.dtype != FP8 or problem.b.dtype != FP8 or min(problem.m, problem.n, problem.k) <= 0:
        return False
    capability = problem.device.capability
    return problem.device.interpreter or (capability is not None and capability >= MIN_CAPABILITY)


def scaled_gemm_configs(signature: Signature) -> list[Config]:
    """The tiled fp8 template's configs for a `scaled_mm` signature (A and B are inputs 0 and 1)."""
    problem = GemmProblem.of(signature, 0, 1)
    if not _supported(problem):
        return []
    if problem.device.interpreter:
        return _configs(INTERPRETED, problem)
    return _configs((*(SMALL_M if problem.m <= 128 else ()), *GENERAL), problem)


def _row_major(spec: TensorSpec) -> bool:
    """A 2-D tensor whose rows a TMA descriptor can read: contiguous rows, 16-byte aligned row stride and offset."""
    return (
        spec.ndim == 2
        and spec.stride[1] == 1
        and (spec.stride[0] * spec.itemsize) % 16 == 0
        and (spec.offset * spec.itemsize) % 16 == 0
    )


def _column_major(spec: TensorSpec) -> bool:
    """A 2-D tensor whose columns a TMA descriptor can read (B as `W.t()` of a row-major W)."""
    return (
        spec.ndim == 2
        and spec.stride[0] == 1
        and (spec.stride[1] * spec.itemsize) % 16 == 0
        and (spec.offset * spec.itemsize) % 16 == 0
    )


def persistent_scaled_gemm_configs(signature: Signature) -> list[Config]:
    """The persistent TMA template's configs: none unless A is row-major and B column-major with
    16-byte aligned strides, and M is 64 or more (one warp group's MMA is 64 rows).

    The device (sm_90+) and Triton (tensor descriptors) are the template's requirements, which the
    selector checks before it asks for configs.
    """
    problem = GemmProblem.of(signature, 0, 1)
    if not _supported(problem) or problem.m < 64:
        return []
    if not (_row_major(problem.a) and _column_major(problem.b)):
        return []
    return _configs(PERSISTENT, problem)
