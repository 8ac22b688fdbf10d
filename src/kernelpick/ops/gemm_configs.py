"""The GEMM templates' config spaces, shaped by the problem: small-M, large, persistent TMA and decode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.signature import Signature
from kernelpick.search.space import gemm_shared_memory
from kernelpick.tensors import TensorSpec

#: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), as the lists below give them.
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
    # Deeper pipelines of the same tile, for the memory-bound M = 128 shapes with long K, where they
    # beat cuBLAS (docs/benchmarks.md, "GEMM suite on an H100").
    (64, 64, 128, 5, 4),
    (64, 64, 128, 6, 4),
    (64, 128, 64, 4, 4),
    (64, 128, 128, 3, 4),
    # Inductor's pick at 128x8192x28672, faster there than this tile with 3 stages
    (64, 128, 128, 4, 4),
    (64, 256, 64, 3, 8),
)
#: For every M above DECODE_MAX_M: medium and large tiles, up to 128x256x64 and 256x128x64 with 8
#: warps. At decode sizes they would all be clamped to 16 rows, mostly with a BLOCK_K of 32 or 64 too
#: short to stream the weights; no GEMM suite picked one at M = 16, so they are not offered there.
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

#: The skinny template is offered up to this M: one 16-row tl.dot tile then holds all of M, so every
#: program streams its own part of B exactly once; above it the tiled template does the same.
DECODE_MAX_M = 16
#: Up to this M the skinny template also runs as a GEMV (no tl.dot), one unrolled line per row.
GEMV_MAX_M = 4
#: The GEMV form's (BLOCK_N, BLOCK_K, num_warps) for one row (M = 1) when B is read along K
#: (`x @ W.T`: W's rows are contiguous): each thread reads one 16-byte vector of bf16 weights per loop
#: step, from one to eight rows of W a program, 2048 or 4096 along K: the fastest of a sweep of up to
#: 880 configs a shape (docs/benchmarks.md, "Decode sizes and the measured GEMV space").
GEMV_ONE_ROW: tuple[tuple[int, int, int], ...] = (
    (1, 2048, 8),
    (2, 2048, 16),
    (8, 2048, 16),
    (1, 4096, 16),
)
#: ... for 2 to 4 rows: 256 along K, again one 16-byte vector of W per thread a step (the sweep's
#: fastest at 4x4096x4096, and the next three within 2 %).
GEMV_ALONG_K: tuple[tuple[int, int, int], ...] = (
    (4, 256, 4),
    (2, 256, 2),
    (8, 256, 4),
    (16, 256, 8),
)
#: ... and when B is read along N (a row-major (K, N) B): wide in N, so that each row of B's tile is
#: one or more whole 128-byte lines.
GEMV_ALONG_N: tuple[tuple[int, int, int], ...] = (
    (32, 128, 4),
    (64, 64, 4),
    (128, 32, 4),
    (64, 128, 8),
    (128, 64, 8),
)
#: The tl.dot form's (BLOCK_N, BLOCK_K, num_stages, num_warps), 16 rows. The first, narrower than any
#: tiled-template tile, is offered as it is; the others only split along K (`_split_k`), since
#: unsplit they are the tiled template's own small-M tiles.
DECODE_DOT: tuple[tuple[int, int, int, int], ...] = (
    (16, 256, 4, 4),
    (32, 256, 4, 4),
    (64, 256, 3, 4),
    (128, 128, 4, 4),
)
#: Each thread holds BLOCK_N * BLOCK_K / (32 * num_warps) float32 sums per unrolled row of the GEMV
#: form (twice that for a gated product); BLOCK_K is halved until they fit in this many registers.
GEMV_ACCUMULATORS = 64
#: The tiled template's threads hold BLOCK_M * BLOCK_N / (32 * num_warps) float32 sums, at most this
#: many in every tile above; a gated product (`gated_mm`) holds two per output, so its widest tiles
#: (128x256 and 256x128 with 8 warps, 128x128 with 4) are left out.
TILE_ACCUMULATORS = 128
#: At most this many K slices; each slice keeps at least two BLOCK_K steps.
MAX_SPLIT_K = 16
#: Triton's interpreter: the GEMV form (one config unsplit, one split) and the tl.dot form split.
INTERPRETED_DECODE_GEMV: tuple[tuple[int, int, int], ...] = ((16, 32, 1), (16, 16, 2))
INTERPRETED_DECODE_DOT: tuple[tuple[int, int, int], ...] = ((16, 16, 2),)

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


def shared_memory_bytes(tile: Tile, itemsize: int, products: int = 1) -> int:
    """The main loop's pipeline: `stages` buffers of an A tile and `products` B tiles."""
    block_m, block_n, block_k, stages, _ = tile
    more = (products - 1) * block_k * block_n * stages * itemsize
    return more + gemm_shared_memory(
        {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "num_stages": stages}, itemsize
    )


def _configs(tiles: list[Tile], problem: GemmProblem, products: int = 1) -> list[Config]:
    # Clamped to the problem (no 128-row tile for 16 rows), duplicates dropped, and a pipeline that
    # would not fit in the device's shared memory left out here, before anything is compiled.
    budget = problem.device.shared_memory_limit
    seen: set[Tile] = set()
    configs = []
    for raw in tiles:
        tile = _clamp(raw, problem)
        if tile in seen:
            continue
        seen.add(tile)
        if budget is not None and shared_memory_bytes(tile, problem.a.itemsize, products) > budget:
            continue
        if products * tile[0] * tile[1] > TILE_ACCUMULATORS * 32 * tile[4]:
            continue
        block_m, block_n, block_k, stages, warps = tile
        kwargs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": GROUP_M}
        configs.append(Config(kwargs, num_warps=warps, num_stages=stages))
    return configs


def _supported(problem: GemmProblem) -> bool:
    a, b = problem.a, problem.b
    return a.dtype in TEMPLATE_DTYPES and a.dtype == b.dtype and min(problem.m, problem.n, problem.k) > 0


def gemm_configs(a_index: int, b_index: int, products: int = 1) -> Callable[[Signature], list[Config]]:
    """The tiled template's configs for a signature whose A and B are inputs `a_index` and `b_index`;
    `products`: how many B matrices share each tile of A (2 for `gated_mm`'s gate and up)."""

    def space(signature: Signature) -> list[Config]:
        problem = GemmProblem.of(signature, a_index, b_index)
        if not _supported(problem):
            return []
        if problem.device.interpreter:
            # Triton's interpreter gets tl.dot of bfloat16 wrong (numpy has no bfloat16): verification
            # would reject every config, so none is offered.
            return [] if problem.a.dtype == torch.bfloat16 else _configs(list(INTERPRETED), problem)
        tiles = [*(SMALL_M if problem.m <= 128 else ()), *(GENERAL if problem.m > DECODE_MAX_M else ())]
        return _configs(tiles, problem, products)

    return space


def _split_k(problem: GemmProblem, programs: int, block_k: int) -> int:
    """How many slices of K fill the GPU: 1 when `programs` (the unsplit grid) already gives every SM
    one, else the smallest power of two that does, each slice keeping two or more BLOCK_K steps."""
    sms = max(1, problem.device.multiprocessors)
    split = 1
    while programs * split < sms and split < MAX_SPLIT_K and problem.k >= 2 * split * 2 * block_k:
        split *= 2
    return split


def _decode_config(block_m: int, block_n: int, block_k: int, split: int, stages: int, warps: int) -> Config:
    kwargs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "SPLIT_K": split}
    return Config(kwargs, num_warps=warps, num_stages=stages)


def _b_along_k(problem: GemmProblem) -> bool:
    """Whether B's elements are contiguous along K (`x @ W.T` with W row-major)."""
    return problem.b.stride[-2] == 1 and problem.b.stride[-1] != 1


def _gemv_configs(problem: GemmProblem, batch: int, products: int) -> list[Config]:
    block_m = _ceil_pow2(problem.m)
    if not _b_along_k(problem):
        table = GEMV_ALONG_N
    else:
        table = GEMV_ONE_ROW if problem.m == 1 else GEMV_ALONG_K
    # a tile whose BLOCK_K is more than half of K is the same loop with fewer programs: left out
    # while another tile takes two steps or more
    tiles = [tile for tile in table if 2 * tile[1] <= problem.k] or list(table)
    configs = []
    for block_n, block_k, warps in tiles:
        block_n = min(block_n, _ceil_pow2(problem.n))
        block_k = min(block_k, _ceil_pow2(problem.k))
        while block_k > 16 and products * problem.m * block_n * block_k > GEMV_ACCUMULATORS * 32 * warps:
            block_k //= 2
        programs = -(-problem.n // block_n) * batch
        split = _split_k(problem, programs, block_k)
        configs.append(_decode_config(block_m, block_n, block_k, split, 1, warps))
    return configs


def _dot_configs(problem: GemmProblem, batch: int, products: int) -> list[Config]:
    budget = problem.device.shared_memory_limit
    configs = []
    for index, (block_n, block_k, stages, warps) in enumerate(DECODE_DOT):
        block_n = min(block_n, max(16, _ceil_pow2(problem.n)))
        block_k = min(block_k, max(16, _ceil_pow2(problem.k)))
        split = _split_k(problem, -(-problem.n // block_n) * batch, block_k)
        if index > 0 and split == 1:
            continue
        if (
            budget is not None
            and shared_memory_bytes((16, block_n, block_k, stages, warps), problem.a.itemsize, products)
            > budget
        ):
            continue
        configs.append(_decode_config(16, block_n, block_k, split, stages, warps))
    return configs


def decode_configs(a_index: int, b_index: int, products: int = 1) -> Callable[[Signature], list[Config]]:
    """The skinny template's configs: none above DECODE_MAX_M rows, else its GEMV form up to GEMV_MAX_M
    rows (no tl.dot) and its tl.dot form, each split along K where its unsplit grid would leave SMs
    idle. Config kwargs: BLOCK_M (16 for tl.dot, else M rounded up to a power of two), BLOCK_N,
    BLOCK_K, SPLIT_K. `products`: how many B matrices share each tile of A (2 for `gated_mm`)."""

    def space(signature: Signature) -> list[Config]:
        problem = GemmProblem.of(signature, a_index, b_index)
        if not _supported(problem) or problem.m > DECODE_MAX_M:
            return []
        batch = problem.a.size[0] if problem.a.ndim == 3 else 1
        gemv = problem.m <= GEMV_MAX_M
        if problem.device.interpreter:
            # tl.dot of bfloat16 is wrong in Triton's interpreter (see gemm_configs); the GEMV form
            # has no tl.dot and runs there in every dtype.
            dot = problem.a.dtype != torch.bfloat16
            return [
                *(
                    _decode_config(_ceil_pow2(problem.m), n, k, split, 1, 4)
                    for n, k, split in (INTERPRETED_DECODE_GEMV if gemv else ())
                ),
                *(
                    _decode_config(16, n, k, split, 2, 4)
                    for n, k, split in (INTERPRETED_DECODE_DOT if dot else ())
                ),
            ]
        found = [
            *(_gemv_configs(problem, batch, products) if gemv else ()),
            *_dot_configs(problem, batch, products),
        ]
        return list(dict.fromkeys(found))

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
