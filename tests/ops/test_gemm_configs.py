"""Tests of the GEMM config spaces: shape-aware, device-aware, bounded."""

from __future__ import annotations

import pytest
import torch

from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.signature import Signature
from kernelpick.ops.gemm_configs import (
    GEMV_ACCUMULATORS,
    GENERAL,
    decode_configs,
    gemm_configs,
    persistent_configs,
    shared_memory_bytes,
)
from kernelpick.ops.gemm_templates import PERSISTENT_TMA_GEMM
from kernelpick.tensors import TensorSpec

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
A100 = DeviceInfo("cuda", 0, "NVIDIA A100-SXM4-80GB", (8, 0), 40 * 2**20, 108)
CPU = DeviceInfo("cpu", None, "cpu", None, 0, 0)
CUDA = torch.device("cuda", 0)


def problem(
    m: int,
    n: int,
    k: int,
    dtype: torch.dtype = torch.bfloat16,
    device: DeviceInfo = H100,
    b_transposed: bool = False,
) -> Signature:
    a = TensorSpec.contiguous((m, k), dtype, CUDA)
    b = (
        TensorSpec(dtype, (k, n), (1, k), 0, CUDA)
        if b_transposed
        else TensorSpec.contiguous((k, n), dtype, CUDA)
    )
    return Signature((a, b), (), None, device)


def tiles(configs: list[Config]) -> set[tuple[int, int, int, int, int]]:
    return {
        (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_stages, c.num_warps)
        for c in configs
    }


def test_small_m_gets_thin_tiles_and_no_wasted_rows() -> None:
    configs = gemm_configs(0, 1)(problem(16, 4096, 14336))
    assert configs and max(c.kwargs["BLOCK_M"] for c in configs) == 16
    assert {(16, 128, 128, 4, 4), (16, 256, 64, 4, 4)} <= tiles(configs)
    m128 = {c.kwargs["BLOCK_M"] for c in gemm_configs(0, 1)(problem(128, 4096, 4096))}
    assert {16, 32, 64, 128} <= m128


def test_medium_m_gets_deep_pipelines_that_fit_the_device() -> None:
    # Inductor's pick at 128x4096x14336 (5 stages) and one deeper: 32 KiB a stage of bf16.
    deep = {(64, 64, 128, 5, 4), (64, 64, 128, 6, 4)}
    assert deep <= tiles(gemm_configs(0, 1)(problem(128, 4096, 14336)))
    assert {(16, 64, 128, 5, 4), (16, 64, 128, 6, 4)} <= tiles(gemm_configs(0, 1)(problem(16, 4096, 14336)))
    small = DeviceInfo(
        "cuda", 0, "a GPU of 100 KiB", (8, 6), 6 * 2**20, 84, shared_memory_per_block=100 * 1024
    )
    assert not deep & tiles(gemm_configs(0, 1)(problem(128, 4096, 14336, device=small)))


def test_large_m_gets_the_large_tiles_with_eight_warps() -> None:
    configs = gemm_configs(0, 1)(problem(8192, 28672, 4096))
    assert {(128, 256, 64, 3, 8), (128, 256, 64, 4, 8), (256, 128, 64, 4, 8)} <= tiles(configs)
    assert min(c.kwargs["BLOCK_M"] for c in configs) >= 64  # no small-M tiles for big problems
    assert all(c.kwargs["GROUP_M"] == 8 for c in configs)
    assert len(configs) == len(set(configs)) <= 30


def test_pipelines_that_do_not_fit_in_shared_memory_are_left_out() -> None:
    fp32 = tiles(gemm_configs(0, 1)(problem(8192, 8192, 8192, torch.float32)))
    assert (128, 256, 64, 4, 8) not in fp32 and (128, 128, 32, 3, 4) in fp32
    assert all(shared_memory_bytes(t, 4) <= 232448 for t in fp32)
    assert (128, 256, 64, 4, 8) in tiles(gemm_configs(0, 1)(problem(8192, 8192, 8192)))


def test_persistent_tma_needs_hopper_aligned_layouts_and_enough_rows() -> None:
    space = persistent_configs(0, 1)
    assert (128, 256, 64, 3, 8) in tiles(space(problem(8192, 28672, 4096)))
    assert space(
        problem(8192, 4096, 4096, b_transposed=True)
    )  # x @ W.T reads W through a permuted descriptor
    # The device is the template's requirement, checked by the selector before configs are asked for.
    assert PERSISTENT_TMA_GEMM.requires is not None
    assert PERSISTENT_TMA_GEMM.requires.unmet(H100) is None
    assert PERSISTENT_TMA_GEMM.requires.unmet(A100) == "needs sm_90 or newer; NVIDIA A100-SXM4-80GB is sm_80"
    assert PERSISTENT_TMA_GEMM.requires.unmet(CPU) is not None
    assert space(problem(16, 4096, 4096)) == []
    assert space(problem(256, 4096, 4099)) == []  # rows of 4099 bf16 are not 16-byte aligned


def test_unsupported_dtypes_and_empty_problems_get_no_template() -> None:
    assert gemm_configs(0, 1)(problem(64, 64, 64, torch.float64)) == []
    assert gemm_configs(0, 1)(problem(0, 64, 64)) == []


def test_the_interpreter_gets_two_small_configs_and_no_bfloat16() -> None:
    assert len(gemm_configs(0, 1)(problem(64, 64, 64, torch.float32, CPU))) == 2
    assert gemm_configs(0, 1)(problem(64, 64, 64, torch.bfloat16, CPU)) == []
    small = gemm_configs(0, 1)(problem(8, 8, 8, torch.float16, CPU))
    assert tiles(small) == {(16, 16, 16, 2, 4)}


@pytest.mark.parametrize("m", [16, 128, 2048, 8192])
def test_every_llama_shape_gets_a_bounded_space(m: int) -> None:
    for n, k in ((6144, 4096), (28672, 4096), (4096, 14336), (8192, 28672)):
        total = len(gemm_configs(0, 1)(problem(m, n, k))) + len(persistent_configs(0, 1)(problem(m, n, k)))
        assert 8 <= total <= 40


LLAMA_NK = (
    (6144, 4096),
    (4096, 4096),
    (28672, 4096),
    (4096, 14336),
    (10240, 8192),
    (8192, 28672),
    (1024, 4096),
)


def decode_tiles(configs: list[Config]) -> list[tuple[int, int, int, int, int, int]]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_stages, num_warps) of each decode config, in order."""
    return [
        (
            c.kwargs["BLOCK_M"],
            c.kwargs["BLOCK_N"],
            c.kwargs["BLOCK_K"],
            c.kwargs["SPLIT_K"],
            c.num_stages,
            c.num_warps,
        )
        for c in configs
    ]


def test_one_row_of_x_at_w_t_on_an_h100_gets_gemv_tiles_and_split_k_where_the_grid_is_short() -> None:
    # 1 x 4096 x 4096, bf16, B = W.T: the GEMV form streams one to eight of W's rows a program, 2048
    # along K (a 16-byte vector a thread a step; 4096 only where K takes two such steps), 512 to 4096
    # programs; the wider tl.dot tiles (128, 64 and 32 programs) would leave some of the 132 SMs idle,
    # so they are split along K.
    assert decode_tiles(decode_configs(0, 1)(problem(1, 4096, 4096, b_transposed=True))) == [
        (1, 1, 2048, 1, 1, 8),
        (1, 2, 2048, 1, 1, 16),
        (1, 8, 2048, 1, 1, 16),
        (16, 16, 256, 1, 4, 4),
        (16, 32, 256, 2, 4, 4),
        (16, 64, 256, 4, 3, 4),
        (16, 128, 128, 8, 4, 4),
    ]


def test_one_row_with_a_long_k_also_gets_4096_along_k() -> None:
    tiles = decode_tiles(decode_configs(0, 1)(problem(1, 8192, 28672, b_transposed=True)))
    assert [t for t in tiles if t[0] == 1] == [
        (1, 1, 2048, 1, 1, 8),
        (1, 2, 2048, 1, 1, 16),
        (1, 8, 2048, 1, 1, 16),
        (1, 1, 4096, 1, 1, 16),
    ]


def test_four_rows_of_x_at_w_t_get_gemv_tiles_256_along_k() -> None:
    tiles = decode_tiles(decode_configs(0, 1)(problem(4, 4096, 4096, b_transposed=True)))
    assert [t for t in tiles if t[0] == 4] == [
        (4, 4, 256, 1, 1, 4),
        (4, 2, 256, 1, 1, 2),
        (4, 8, 256, 1, 1, 4),
        (4, 16, 256, 1, 1, 8),
    ]


def test_a_row_major_b_gets_gemv_tiles_wide_in_n() -> None:
    tiles = decode_tiles(decode_configs(0, 1)(problem(1, 4096, 4096)))
    assert min(t[1] for t in tiles if t[0] == 1) >= 32


@pytest.mark.parametrize("m", [1, 3, 4, 8, 16])
@pytest.mark.parametrize("transposed", [True, False], ids=["w-t", "row-major"])
def test_decode_spaces_are_small_and_fit_the_device(m: int, transposed: bool) -> None:
    for n, k in LLAMA_NK:
        for dtype in (torch.bfloat16, torch.float32):
            configs = decode_configs(0, 1)(problem(m, n, k, dtype, b_transposed=transposed))
            tiles = decode_tiles(configs)
            assert 1 <= len(configs) == len(set(configs)) <= 12
            assert all(t[0] == 16 for t in tiles) == (m > 4)  # the GEMV form up to 4 rows
            for block_m, block_n, block_k, split, stages, warps in tiles:
                assert block_m >= m
                if split > 1:  # split only where the unsplit grid leaves SMs idle, no more than that
                    assert -(-n // block_n) * split // 2 < H100.multiprocessors
                    assert k >= split * 2 * block_k  # each slice takes two BLOCK_K steps or more
                if block_m == 16:
                    assert (
                        shared_memory_bytes((16, block_n, block_k, stages, warps), dtype.itemsize) <= 232448
                    )
                else:  # float32 sums a thread keeps across the loop
                    assert m * block_n * block_k <= GEMV_ACCUMULATORS * 32 * warps


def test_wide_problems_are_not_split_and_narrow_ones_are() -> None:
    assert all(
        t[3] == 1 for t in decode_tiles(decode_configs(0, 1)(problem(1, 28672, 4096, b_transposed=True)))
    )
    narrow = decode_tiles(decode_configs(0, 1)(problem(16, 1024, 4096, b_transposed=True)))
    assert narrow and all(t[3] > 1 for t in narrow)


@pytest.mark.parametrize("m", [17, 128, 2048])
def test_the_skinny_template_is_offered_up_to_16_rows_only(m: int) -> None:
    assert decode_configs(0, 1)(problem(m, 4096, 4096, b_transposed=True)) == []
    assert decode_configs(0, 1)(problem(m, 4096, 4096, torch.float64)) == []


def test_up_to_16_rows_the_tiled_template_keeps_only_its_small_m_tiles() -> None:
    general = {tile[2:] for tile in GENERAL}  # (BLOCK_K, stages, warps) of the large tiles
    small = tiles(gemm_configs(0, 1)(problem(16, 4096, 4096)))
    assert small and all(t[0] == 16 for t in small)
    assert (16, 64, 32, 2, 4) not in small and (16, 128, 32, 3, 4) not in small  # clamped GENERAL tiles
    assert any(t[2:] in general for t in tiles(gemm_configs(0, 1)(problem(17, 4096, 4096))))


def test_the_interpreter_gets_decode_configs_that_exercise_both_forms_and_the_split() -> None:
    fp32 = decode_tiles(decode_configs(0, 1)(problem(1, 64, 64, torch.float32, CPU)))
    assert [(t[0], t[3]) for t in fp32] == [(1, 1), (1, 2), (16, 2)]
    # no tl.dot of bfloat16 in the interpreter: only the GEMV form
    assert [t[0] for t in decode_tiles(decode_configs(0, 1)(problem(3, 64, 64, torch.bfloat16, CPU)))] == [
        4,
        4,
    ]
    assert decode_tiles(decode_configs(0, 1)(problem(8, 64, 64, torch.float32, CPU))) == [
        (16, 16, 16, 2, 2, 4)
    ]
    assert decode_configs(0, 1)(problem(8, 64, 64, torch.bfloat16, CPU)) == []


def test_a_gated_product_keeps_two_sums_and_two_b_tiles_within_the_same_budgets() -> None:
    # gated_mm's tiles hold two float32 sums per output and stream two B tiles a stage.
    large = problem(8192, 14336, 4096)
    plain, two = tiles(gemm_configs(0, 1)(large)), tiles(gemm_configs(0, 1, products=2)(large))
    assert two and two < plain
    assert (128, 256, 64, 3, 8) in plain and (128, 256, 64, 3, 8) not in two
    assert all(2 * m * n <= 128 * 32 * warps for m, n, _, _, warps in two)
    budget = H100.shared_memory_limit
    assert budget is not None
    assert all(shared_memory_bytes(tile, 2, products=2) <= budget for tile in two)
    for rows in (1, 4):
        decode = problem(rows, 14336, 4096, b_transposed=True)
        plain_decode, gated_decode = (decode_configs(0, 1, products=p)(decode) for p in (1, 2))
        assert gated_decode
        for config in gated_decode:
            block_m, block_n, block_k = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
            tile = (block_m, block_n, block_k, config.num_stages, config.num_warps)
            assert shared_memory_bytes(tile, 2, products=2) <= budget
            if block_m < 16:  # the GEMV form: each unrolled row keeps two (BLOCK_K, BLOCK_N) sums
                assert 2 * rows * block_n * block_k <= GEMV_ACCUMULATORS * 32 * config.num_warps

    # at 4 rows the wider GEMV tiles halve their BLOCK_K for the second sum
    def gemv(configs: list[Config]) -> set[tuple[int, int]]:
        return {(c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]) for c in configs if c.kwargs["BLOCK_M"] < 16}

    assert (8, 256) in gemv(plain_decode) and (8, 128) in gemv(gated_decode)
