"""The GEMM templates' config spaces, shaped by the problem: small-M tiles, large tiles, persistent TMA.

Lists are (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps). Blocks are clamped to the problem
(no 128-row tile for 16 rows), duplicates dropped, and configs whose pipeline would not fit in the
device's shared memory (`DeviceInfo.shared_memory_limit`) are left out before anything is compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.search.space import gemm_shared_memory
from kernelpick.select.signature import Signature
from kernelpick.tensors import TensorSpec

Tile = tuple[int, int, int, int, int]

#: For M up to 128 (decode, small batches): thin tiles along M, wide along N and K.
SMALL_M: tuple[Tile, ...] = (
    (16, 32, 128, 6, 4),  # narrow N: enough programs to stream the weights at small N
    (16, 32, 256, 6, 4),
    (16, 64, 128, 4, 4),
    (16, 64, 256, 4, 4),
    (16, 128, 128, 4, 4),
    (16, 64, 256, 3, 4),
    (16, 128, 64, 5, 4),
    (16, 256, 64, 4, 4),
    (32, 64, 128, 4, 4),
    (32, 128, 64, 4, 4),
    (32, 128, 128, 3, 4),
    (32, 256, 64, 3, 8),
    (64, 64, 128, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 128, 128, 3, 4),
    (64, 256, 64, 3, 8),
)
#: For every M: medium and large tiles, up to 128x256x64 and 256x128x64 with 8 warps.
GENERAL: tuple[Tile, ...] = (
    (64, 64, 32, 2, 4),
    (64, 128, 32, 3, 4),
    (64, 128, 64, 4, 4),
    (128, 64, 32, 3, 4),
    (128, 64, 64, 4, 8),
    (128, 128, 32, 3, 4),
    (128, 128, 64, 3, 4),
    (128, 128, 64, 4, 8),
    (128, 128, 128, 3, 8),
    (128, 256, 64, 3, 8),
    (128, 256, 64, 4, 8),
    (256, 128, 64, 3, 8),
    (256, 128, 64, 4, 8),
)
#: The persistent TMA kernel (compute capability 9.0 and newer), for M of 64 and more.
PERSISTENT: tuple[Tile, ...] = (
    (128, 256, 64, 3, 8),
    (128, 256, 64, 4, 8),
    (256, 128, 64, 3, 8),
    (128, 128, 64, 3, 8),
    (128, 128, 64, 4, 4),
    (128, 128, 128, 3, 8),
    (64, 128, 64, 4, 4),
    (64, 256, 64, 3, 8),
)
#: Triton's interpreter: two small configs, enough to exercise the templates on a CPU.
INTERPRETED: tuple[Tile, ...] = ((16, 16, 16, 2, 4), (32, 32, 32, 2, 4))

GROUP_M = 8
TEMPLATE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True, slots=True)
class GemmProblem:
    """The sizes and types a GEMM config space depends on."""

    m: int
    n: int
    k: int
    a: TensorSpec
    b: TensorSpec
    device: DeviceInfo

    @classmethod
    def of(cls, signature: Signature, a_index: int, b_index: int) -> GemmProblem:
        a, b = signature.tensor(a_index), signature.tensor(b_index)
        return cls(a.size[-2], b.size[-1], a.size[-1], a, b, signature.device)


def _ceil_pow2(value: int) -> int:
    return 1 << max(0, value - 1).bit_length()


def _clamp(tile: Tile, problem: GemmProblem) -> Tile:
    block_m, block_n, block_k, stages, warps = tile
    return (
        min(block_m, max(16, _ceil_pow2(problem.m))),
        min(block_n, max(16, _ceil_pow2(problem.n))),
        min(block_k, max(16, _ceil_pow2(problem.k))),
        stages,
        warps,
    )


def shared_memory_bytes(tile: Tile, itemsize: int) -> int:
    """The main loop's pipeline: `stages` buffers of an A and a B tile."""
    block_m, block_n, block_k, stages, _ = tile
    return gemm_shared_memory(
        {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "num_stages": stages}, itemsize
    )


def _configs(tiles: list[Tile], problem: GemmProblem) -> list[Config]:
    budget = problem.device.shared_memory_limit
    seen: set[Tile] = set()
    configs = []
    for raw in tiles:
        tile = _clamp(raw, problem)
        if tile in seen:
            continue
        seen.add(tile)
        if budget is not None and shared_memory_bytes(tile, problem.a.itemsize) > budget:
            continue
        block_m, block_n, block_k, stages, warps = tile
        kwargs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": GROUP_M}
        configs.append(Config(kwargs, num_warps=warps, num_stages=stages))
    return configs


def _supported(problem: GemmProblem) -> bool:
    a, b = problem.a, problem.b
    return a.dtype in TEMPLATE_DTYPES and a.dtype == b.dtype and min(problem.m, problem.n, problem.k) > 0


def gemm_configs(a_index: int, b_index: int) -> Callable[[Signature], list[Config]]:
    """The tiled template's configs for a signature whose A and B are inputs `a_index` and `b_index`."""

    def space(signature: Signature) -> list[Config]:
        problem = GemmProblem.of(signature, a_index, b_index)
        if not _supported(problem):
            return []
        if problem.device.interpreter:
            # Triton's interpreter gets tl.dot of bfloat16 wrong (numpy has no bfloat16): verification
            # would reject every config, so none is offered.
            return [] if problem.a.dtype == torch.bfloat16 else _configs(list(INTERPRETED), problem)
        tiles = [*(SMALL_M if problem.m <= 128 else ()), *GENERAL]
        return _configs(tiles, problem)

    return space


def _descriptor_ready(spec: TensorSpec) -> bool:
    """A 2-D tensor a TMA descriptor can read: one dimension contiguous, the other and the offset 16-byte aligned."""
    if spec.ndim != 2 or (spec.offset * spec.itemsize) % 16:
        return False
    rows, columns = spec.stride
    if columns == 1:
        return (rows * spec.itemsize) % 16 == 0
    return rows == 1 and (columns * spec.itemsize) % 16 == 0


def persistent_configs(a_index: int, b_index: int) -> Callable[[Signature], list[Config]]:
    """The persistent TMA template's configs: none unless the layouts allow TMA and M is 64 or more.

    The device (sm_90+) and Triton (tensor descriptors) are the template's requirements, which the
    selector checks before it asks for configs (`PERSISTENT_TMA_GEMM.requires`).
    """

    def space(signature: Signature) -> list[Config]:
        problem = GemmProblem.of(signature, a_index, b_index)
        if not _supported(problem):
            return []
        if problem.m < 64 or not (_descriptor_ready(problem.a) and _descriptor_ready(problem.b)):
            return []
        return _configs(list(PERSISTENT), problem)

    return space
