"""Tests of the GEMM config spaces: shape-aware, device-aware, bounded."""

from __future__ import annotations

import pytest
import torch

from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.ops.gemm_configs import gemm_configs, persistent_configs, shared_memory_bytes
from kernelpick.ops.gemm_templates import PERSISTENT_TMA_GEMM
from kernelpick.select.signature import Signature
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
