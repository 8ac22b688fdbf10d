"""The fp8 templates and config spaces of kernelpick.ops.scaled_mm as rendered for GPUs, lowered for
sm_90 here, without a GPU (to Triton's GPU dialect, TTGIR: the MMA instructions are chosen there)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from triton.backends.compiler import GPUTarget

from kernelpick.bench.inputs import new_values
from kernelpick.compile.target import specialize
from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.signature import Signature
from kernelpick.ops.gemm_configs import shared_memory_bytes
from kernelpick.ops.scaled_mm import _BIAS
from kernelpick.ops.scaled_mm_configs import PERSISTENT, persistent_scaled_gemm_configs, scaled_gemm_configs
from kernelpick.ops.scaled_mm_templates import persistent_tma_scaled_gemm, scaled_gemm
from kernelpick.select.template import TritonTemplate
from kernelpick.select.template_choice import TemplateChoice, _generate, template
from kernelpick.tensors import TensorSpec

FP8 = torch.float8_e4m3fn
H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
LARGE = Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=3)
DECODE = Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=4, num_stages=4)


def problem(m: int, n: int, k: int, *, per_row: bool = False) -> tuple[torch.Tensor, ...]:
    """Empty inputs of `scaled_mm` with a bias: a row-major a, b = w.t() of a row-major w."""
    scales = (torch.empty(m, 1), torch.empty(1, n)) if per_row else (torch.empty(()), torch.empty(()))
    a, w = torch.empty(m, k, dtype=FP8), torch.empty(n, k, dtype=FP8)
    return (a, w.t(), *scales, torch.empty(n, dtype=torch.bfloat16))


def signature_on(device: DeviceInfo, inputs: tuple[torch.Tensor, ...]) -> Signature:
    return dataclasses.replace(Signature.of(inputs, {}), device=device)


def lower_for_hopper(
    tmpl: TritonTemplate, config: Config, inputs: tuple[torch.Tensor, ...], fast: bool
) -> str:
    """Render as for an H100 and lower to TTGIR for sm_90; returns the TTGIR's text."""
    space = template(
        tmpl,
        configs=[config],
        epilogue=_BIAS,
        arguments=("A", "B", "SCALE_A", "SCALE_B", "bias"),
        constants={"FAST_ACCUM": fast, "NUM_SMS": 132},
    )
    (choice,) = space.choices_for(signature_on(H100, inputs))
    assert isinstance(choice, TemplateChoice)
    kernels = choice.kernels()
    arguments_of = _generate(choice, kernels, Signature.of(inputs, {}))[1]
    args, _ = arguments_of(*new_values(inputs, {})[0])
    specialization = specialize(
        kernels[0][0], args, choice.launch_config.all_kwargs(), target=GPUTarget("cuda", 90, 32)
    )
    return str(specialization.lower("ttgir"))


def dot_lines(ttgir: str) -> list[str]:
    return [line.strip() for line in ttgir.splitlines() if "ttng.warp_group_dot " in line]


@pytest.mark.parametrize("tma", [False, True], ids=["tiled", "persistent-tma"])
@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
def test_the_templates_lower_to_fp8_wgmma_for_hopper(tma: bool, per_row: bool) -> None:
    tmpl = persistent_tma_scaled_gemm(torch.bfloat16) if tma else scaled_gemm(torch.bfloat16)
    ttgir = lower_for_hopper(tmpl, LARGE, problem(256, 512, 1024, per_row=per_row), fast=False)
    (dot,) = dot_lines(ttgir)
    assert "f8E4M3FN" in dot and "-> tensor<128x128xf32" in dot


@pytest.mark.parametrize("tma", [False, True], ids=["tiled", "persistent-tma"])
def test_fast_accumulation_accumulates_in_the_tensor_cores_and_precise_adds_each_slice_in_float32(
    tma: bool,
) -> None:
    """use_fast_accum=False: each BLOCK_K slice's dot starts from zero and is added to the float32 sum
    (Triton does not fold that addition into an fp8 dot on sm_90); True: the dot takes the sum."""
    tmpl = persistent_tma_scaled_gemm(torch.bfloat16) if tma else scaled_gemm(torch.bfloat16)
    inputs = problem(256, 512, 1024)
    (precise,) = dot_lines(lower_for_hopper(tmpl, LARGE, inputs, fast=False))
    (fast,) = dot_lines(lower_for_hopper(tmpl, LARGE, inputs, fast=True))
    assert "maxNumImpreciseAcc = 1073741824" in precise  # Triton's sm_90 default: never promoted
    assert precise.split(",")[2].strip().startswith("%cst")  # the accumulator operand: zeros
    assert not fast.split(",")[2].strip().startswith("%cst")


def test_a_decode_tile_lowers_to_fp8_mma_of_16_rows() -> None:
    ttgir = lower_for_hopper(scaled_gemm(torch.bfloat16), DECODE, problem(1, 4096, 4096), fast=False)
    assert "versionMajor = 2" in ttgir and "tt.dot" in ttgir and "f8E4M3FN" in ttgir


def test_the_tiled_space_follows_m_and_fits_the_shared_memory() -> None:
    decode = scaled_gemm_configs(signature_on(H100, problem(1, 4096, 4096)))
    prefill = scaled_gemm_configs(signature_on(H100, problem(2048, 4096, 4096)))
    assert decode and {c.kwargs["BLOCK_M"] for c in decode} == {16}  # clamped to one MMA's rows
    assert min(c.kwargs["BLOCK_M"] for c in prefill) == 64  # no small-M tiles
    limit = H100.shared_memory_limit
    assert limit is not None
    for config in decode + prefill:
        sizes = config.kwargs
        tile = (sizes["BLOCK_M"], sizes["BLOCK_N"], sizes["BLOCK_K"], config.num_stages or 0, 0)
        assert shared_memory_bytes(tile, 1) <= limit


def test_the_templates_need_fp8_tensor_cores() -> None:
    inputs = problem(256, 512, 1024)
    ampere = dataclasses.replace(H100, name="NVIDIA A100-SXM4-80GB", capability=(8, 0))
    ada = dataclasses.replace(H100, name="NVIDIA L4", capability=(8, 9))
    assert scaled_gemm_configs(signature_on(ampere, inputs)) == []
    assert scaled_gemm_configs(signature_on(ada, inputs))


def test_the_persistent_space_needs_64_rows_and_tma_readable_layouts() -> None:
    assert len(persistent_scaled_gemm_configs(signature_on(H100, problem(128, 512, 1024)))) == len(PERSISTENT)
    assert persistent_scaled_gemm_configs(signature_on(H100, problem(32, 512, 1024))) == []
    a, b, *rest = problem(128, 512, 1024)
    row_major_b = (a, b.contiguous(), *rest)
    assert persistent_scaled_gemm_configs(signature_on(H100, row_major_b)) == []
    padded = torch.empty(128, 1024 + 8, dtype=FP8)[:, :1024]  # rows 1032 bytes apart: not 16-aligned
    assert persistent_scaled_gemm_configs(signature_on(H100, (padded, b, *rest))) == []


def test_the_persistent_grid_is_capped_by_the_sm_count() -> None:
    inputs = {
        n: TensorSpec.of(t) for n, t in zip(("A", "B", "SCALE_A", "SCALE_B"), problem(8192, 4096, 4096))
    }
    rendered = persistent_tma_scaled_gemm(torch.float16).prepare(
        LARGE, inputs, device=H100, constants={"FAST_ACCUM": False, "NUM_SMS": 132}
    )
    assert rendered.grid == (132,) and rendered.output.dtype == torch.float16
    tiled = scaled_gemm(torch.float32).prepare(LARGE, inputs, device=H100, constants={"FAST_ACCUM": False})
    assert tiled.grid == (64 * 32,) and tiled.output.dtype == torch.float32
