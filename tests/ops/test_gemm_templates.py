"""The GEMM templates as rendered for a Hopper GPU, lowered to TTIR for sm_90 here, without a GPU."""

from __future__ import annotations

import pytest
import torch

from kernelpick.bench.inputs import Example, new_values
from kernelpick.compile.precompile import CompileJob, compile_each
from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.signature import Signature
from kernelpick.ops.gemm import _EPILOGUES, ACTIVATIONS
from kernelpick.ops.gemm_templates import GEMM, PERSISTENT_TMA_GEMM, SKINNY_GEMM, gated
from kernelpick.select.render import Epilogue
from kernelpick.select.template import TritonTemplate
from kernelpick.select.template_choice import TemplateChoice, _generate, template
from kernelpick.tensors import TensorSpec

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
LARGE = Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3)
SMALL_M = Config({"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4)


def lower_for_hopper(
    gemm: TritonTemplate,
    config: Config,
    inputs: tuple[torch.Tensor, ...],
    arguments: tuple[str, ...],
    epilogue: Epilogue | None,
) -> str:
    """Render as for an H100 and lower the kernel to TTIR for sm_90; returns the rendered source."""
    gpu_signature = Signature(tuple(TensorSpec.of(t) for t in inputs), (), False, H100)
    space = template(
        gemm,
        configs=[config],
        arguments=arguments,
        epilogue=epilogue,
        constants={"ALLOW_TF32": False, "NUM_SMS": 132},
    )
    (choice,) = space.choices_for(gpu_signature)
    assert isinstance(choice, TemplateChoice)
    cpu_signature = Signature.of(inputs, {})
    kernels = choice.kernels()
    arguments_of = _generate(choice, kernels, cpu_signature)[1]
    args, _ = arguments_of(*new_values(inputs, {})[0])
    job = CompileJob(kernels[0][0], args, {}, choice.launch_config, choice.rendered.grid)
    (outcome,) = compile_each([lambda: job], interpreter=True, workers=1)
    assert outcome.ok, outcome.message
    return choice.rendered.source


@pytest.mark.parametrize("config", [LARGE, SMALL_M], ids=["128x256x64", "16x128x128"])
def test_the_tiled_template_compiles_for_hopper_with_a_fused_epilogue(config: Config) -> None:
    bias, a, w = (
        torch.empty(512),
        torch.empty(256, 1024, dtype=torch.bfloat16),
        torch.empty(512, 1024, dtype=torch.bfloat16),
    )
    source = lower_for_hopper(
        GEMM, config, (bias.bfloat16(), a, w.t()), ("bias", "A", "B"), _EPILOGUES["gelu"]
    )
    assert "tl.erf" in source and "stride_bk = 1" in source


def test_the_batched_template_compiles_for_hopper() -> None:
    a, b = torch.empty(4, 256, 512, dtype=torch.float16), torch.empty(4, 512, 384, dtype=torch.float16)
    source = lower_for_hopper(GEMM, LARGE, (a, b), ("A", "B"), None)
    assert "idx_b = tl.program_id(1)" in source


@pytest.mark.parametrize("transposed", [False, True], ids=["b-rows", "b-columns"])
def test_the_persistent_tma_template_compiles_for_hopper(transposed: bool) -> None:
    a = torch.empty(512, 1024, dtype=torch.bfloat16)
    b = (
        torch.empty(768, 1024, dtype=torch.bfloat16).t()
        if transposed
        else torch.empty(1024, 768, dtype=torch.bfloat16)
    )
    source = lower_for_hopper(PERSISTENT_TMA_GEMM, LARGE, (a, b), ("A", "B"), None)
    assert "NUM_SMS: tl.constexpr = 132" in source
    assert ("B_desc_10" in source) == transposed


def test_the_grid_of_the_persistent_template_is_capped_by_the_sm_count() -> None:
    a, b = (
        TensorSpec.contiguous((8192, 4096), torch.bfloat16, torch.device("cpu")),
        TensorSpec.contiguous((4096, 8192), torch.bfloat16, torch.device("cpu")),
    )
    rendered = PERSISTENT_TMA_GEMM.prepare(
        LARGE, {"A": a, "B": b}, device=H100, constants={"ALLOW_TF32": False, "NUM_SMS": 132}
    )
    assert rendered.grid == (132,)
    tiled = GEMM.prepare(LARGE, {"A": a, "B": b}, device=H100, constants={"ALLOW_TF32": False})
    assert tiled.grid == (64 * 32, 1)


def lower_every_kernel_for_hopper(
    config: Config, inputs: tuple[torch.Tensor, ...], arguments: tuple[str, ...], epilogue: Epilogue | None
) -> TemplateChoice:
    """Render the skinny template as for an H100 and lower each kernel of a call to TTIR for sm_90."""
    gpu_signature = Signature(tuple(TensorSpec.of(t) for t in inputs), (), False, H100)
    space = template(
        SKINNY_GEMM,
        configs=[config],
        arguments=arguments,
        epilogue=epilogue,
        constants={"ALLOW_TF32": False, "NUM_SMS": 132},
    )
    (choice,) = space.choices_for(gpu_signature)
    assert isinstance(choice, TemplateChoice)
    job = choice.compile_job(Example(*new_values(inputs, {})), Signature.of(inputs, {}))
    assert isinstance(job, CompileJob)
    assert len(job.companions) == len(choice.rendered.after)
    (outcome,) = compile_each([lambda: job], interpreter=True, workers=1)
    assert outcome.ok, outcome.message
    return choice


def skinny(block_m: int, block_n: int, block_k: int, split: int, stages: int = 1, warps: int = 4) -> Config:
    kwargs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "SPLIT_K": split}
    return Config(kwargs, num_warps=warps, num_stages=stages)


@pytest.mark.parametrize("split", [1, 4])
def test_the_gemv_form_compiles_for_hopper_with_a_fused_epilogue(split: int) -> None:
    bias, x, weight = (
        torch.empty(4096, dtype=torch.bfloat16),
        torch.empty(3, 4096, dtype=torch.bfloat16),
        torch.empty(4096, 4096, dtype=torch.bfloat16),
    )
    choice = lower_every_kernel_for_hopper(
        skinny(4, 16, 256, split), (bias, x, weight.t()), ("bias", "A", "B"), _EPILOGUES["gelu"]
    )
    source = choice.rendered.source
    assert "tl.dot" not in source and source.count("tl.erf") == 1  # the epilogue once, where it stores
    assert "acc_2 +=" in source and "acc_3" not in source  # three rows unrolled, not four
    if split == 1:
        assert choice.rendered.after == () and "WS" not in source
    else:
        (reduce,) = choice.rendered.after
        assert reduce.kernel_name.endswith("_reduce") and f"def {reduce.kernel_name}(" in source
        assert [p.shape for p in choice.rendered.parameters if p.kind == "workspace"] == [(4, 1, 3, 4096)]
        assert choice.rendered.grid == (256, 4, 1)


def test_the_split_tl_dot_form_compiles_for_hopper_batched() -> None:
    a, b = torch.empty(2, 16, 4096, dtype=torch.float16), torch.empty(2, 4096, 1024, dtype=torch.float16)
    choice = lower_every_kernel_for_hopper(skinny(16, 64, 256, 8, stages=3), (a, b), ("A", "B"), None)
    assert "tl.dot" in choice.rendered.source and "idx_b = tl.program_id(2)" in choice.rendered.source
    assert choice.rendered.grid == (16, 8, 2)
    assert choice.rendered.after[0].grid == (32, 2)  # 16 x 1024 partial sums, 512 per program


@pytest.mark.parametrize("config", [LARGE, SMALL_M], ids=["128x256x64", "16x128x128"])
def test_the_gated_tiled_template_compiles_for_hopper(config: Config) -> None:
    a, gate, up = (
        torch.empty(shape, dtype=torch.bfloat16) for shape in ((64, 1024), (512, 1024), (512, 1024))
    )
    template = gated(GEMM, "silu", ACTIVATIONS["silu"] or "")
    source = lower_for_hopper(template, config, (a, gate.t(), up.t()), ("A", "B", "B_UP"), None)
    assert source.count("tl.dot(") == 2 and source.count("tl.sigmoid") == 1


@pytest.mark.parametrize(("rows", "split"), [(1, 1), (3, 4), (16, 4)])
def test_the_gated_skinny_template_compiles_for_hopper(rows: int, split: int) -> None:
    x, gate, up = (
        torch.empty(shape, dtype=torch.bfloat16) for shape in ((rows, 4096), (4096, 4096), (4096, 4096))
    )
    config = skinny({1: 1, 3: 4, 16: 16}[rows], 16 if rows < 16 else 64, 256, split)
    space = template(
        gated(SKINNY_GEMM, "gelu", ACTIVATIONS["gelu"] or ""),
        configs=[config],
        constants={"ALLOW_TF32": False, "NUM_SMS": 132},
    )
    inputs = (x, gate.t(), up.t())
    (choice,) = space.choices_for(Signature(tuple(TensorSpec.of(t) for t in inputs), (), False, H100))
    assert isinstance(choice, TemplateChoice)
    job = choice.compile_job(Example(*new_values(inputs, {})), Signature.of(inputs, {}))
    assert isinstance(job, CompileJob)
    (outcome,) = compile_each([lambda: job], interpreter=True, workers=1)
    assert outcome.ok, outcome.message
    source = choice.rendered.source
    assert source.count("tl.erf") == 1  # the activation once, where the output is stored
    if split > 1:  # both products' partial sums in one workspace, reduced before the activation
        assert [p.shape for p in choice.rendered.parameters if p.kind == "workspace"] == [
            (2 * split, 1, rows, 4096)
        ]
