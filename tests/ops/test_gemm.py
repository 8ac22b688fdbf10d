"""Tests of kernelpick.ops: mm, addmm and bmm on CPU, the Triton templates run in the interpreter."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from kernelpick import Config, Selector, extern, ops, template
from kernelpick.bench.verify import tolerance_for
from kernelpick.device import DeviceInfo
from kernelpick.errors import ConfigError
from kernelpick.ops.gemm import HalfPrecisionOnly, torch_addmm
from kernelpick.ops.gemm_templates import PERSISTENT_TMA_GEMM
from kernelpick.select.record import SelectionRecord
from kernelpick.select.signature import Signature


def record_of(name: str) -> SelectionRecord:
    record = ops.selector(name).last_selection
    assert record is not None
    return record


def template_rows(record: SelectionRecord) -> list[str]:
    return [r.name for r in record.results if r.description["kind"] == "template"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mm_is_correct_and_its_templates_pass_verification(dtype: torch.dtype) -> None:
    a, b = torch.randn(32, 48, dtype=dtype), torch.randn(48, 24, dtype=dtype)
    out = ops.mm(a, b)
    assert out.dtype == dtype and out.shape == (32, 24)
    torch.testing.assert_close(out, torch.mm(a, b))
    record = record_of("mm")
    assert len(template_rows(record)) == 2  # the interpreter's two configs; no TMA on a CPU
    assert all(r.result.ok for r in record.results), [(r.name, r.result.message) for r in record.results]


def test_mm_with_a_transposed_b_is_another_signature_and_still_correct() -> None:
    a, weight = torch.randn(20, 40), torch.randn(36, 40)
    ops.mm(a, weight.t().contiguous())
    out = ops.mm(a, weight.t())  # the usual `x @ W.T` layout
    torch.testing.assert_close(out, a @ weight.t())
    record = record_of("mm")
    assert "stride=[1, 40]" in str(record.signature)
    assert all(r.result.ok for r in record.results)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "silu"])
def test_addmm_fuses_bias_and_activation(activation: str | None) -> None:
    bias, a, b = torch.randn(24), torch.randn(16, 32), torch.randn(32, 24)
    out = ops.addmm(bias, a, b, activation=activation)
    torch.testing.assert_close(out, torch_addmm(bias, a, b, activation=activation))
    record = record_of("addmm" if activation is None else f"addmm_{activation}")
    rows = template_rows(record)
    expected = "bias" if activation is None else f"bias+{activation}"
    assert rows and all(name.startswith(f"triton_addmm[{expected}]") for name in rows)
    assert all(r.result.ok for r in record.results), [(r.name, r.result.message) for r in record.results]


def test_addmm_relu_also_offers_cublaslt_fused_epilogue() -> None:
    bias, a, b = torch.randn(24), torch.randn(16, 32), torch.randn(32, 24)
    torch.testing.assert_close(ops.addmm(bias, a, b, activation="relu"), F.relu(torch.addmm(bias, a, b)))
    results = {r.name: r.result for r in record_of("addmm_relu").results}
    assert results["torch._addmm_activation[relu]"].ok


def _gpu_signature(dtype: torch.dtype) -> Signature:
    bias, a, b = (
        torch.randn(24, dtype=dtype),
        torch.randn(16, 32, dtype=dtype),
        torch.randn(32, 24, dtype=dtype),
    )
    gpu = DeviceInfo("cuda", 0, "NVIDIA H200", (9, 0), 50 << 20, 132)
    return dataclasses.replace(Signature.of((bias, a, b), {}), device=gpu)


def test_tanh_gelu_epilogue_is_offered_for_half_precision_on_gpus_only() -> None:
    [space] = [s for s in ops.selector("addmm_gelu").spaces if isinstance(s, HalfPrecisionOnly)]
    assert space.name == "torch._addmm_activation[gelu_tanh]"
    assert [c.name for c in space.choices_for(_gpu_signature(torch.bfloat16))] == [space.name]
    assert space.choices_for(_gpu_signature(torch.float16))
    # float32 keeps exact GELU: it resolves the approximation's difference
    assert space.choices_for(_gpu_signature(torch.float32)) == []
    bias, a, b = torch.randn(24), torch.randn(16, 32), torch.randn(32, 24)
    ops.addmm(bias, a, b, activation="gelu")
    assert space.name not in {r.name for r in record_of("addmm_gelu").results}  # CPU: not offered


def test_tanh_gelu_differs_from_exact_gelu_within_half_precision_tolerance_only() -> None:
    # What HalfPrecisionOnly rests on: at most 4.7e-4 apart, inside the tolerance of fp16 and bf16
    # outputs of unit RMS, outside float32's.
    x = torch.linspace(-10, 10, 200_001, dtype=torch.float64)
    difference = (F.gelu(x, approximate="tanh") - F.gelu(x)).abs()
    worst = int(difference.argmax())
    assert 4.6e-4 < float(difference[worst]) < 4.8e-4 and abs(abs(float(x[worst])) - 2.7) < 0.01
    tolerance = {dtype: tolerance_for(dtype) for dtype in (torch.float16, torch.bfloat16, torch.float32)}
    assert all(float(difference[worst]) < tolerance[dtype].atol for dtype in (torch.float16, torch.bfloat16))
    assert float(difference[worst]) > tolerance[torch.float32].atol


def test_addmm_takes_every_bias_torch_broadcasts() -> None:
    a, b = torch.randn(16, 32), torch.randn(32, 24)
    for bias in (torch.randn(16, 24), torch.randn(16, 1), torch.randn(1, 24)):
        torch.testing.assert_close(ops.addmm(bias, a, b, activation="relu"), F.relu(torch.addmm(bias, a, b)))
        assert all(r.result.ok for r in record_of("addmm_relu").results)


def test_addmm_refuses_an_unknown_activation() -> None:
    with pytest.raises(ConfigError, match="activation 'tanh' is not supported"):
        ops.addmm(torch.randn(4), torch.randn(4, 4), torch.randn(4, 4), activation="tanh")


def test_bmm_is_correct_and_its_template_handles_the_batch() -> None:
    a, b = torch.randn(3, 16, 40), torch.randn(3, 40, 24)
    torch.testing.assert_close(ops.bmm(a, b), torch.bmm(a, b))
    record = record_of("bmm")
    assert template_rows(record) and all(r.result.ok for r in record.results)


def test_bfloat16_on_a_cpu_offers_only_torch() -> None:
    a, b = torch.randn(16, 16, dtype=torch.bfloat16), torch.randn(16, 16, dtype=torch.bfloat16)
    torch.testing.assert_close(ops.mm(a, b), torch.mm(a, b))
    assert [r.name for r in record_of("mm").results] == ["torch.mm"]


def test_an_unknown_op_is_named() -> None:
    with pytest.raises(
        ConfigError,
        match=r"has no operation .conv.; it has mm, mm_tf32, bmm, bmm_tf32, addmm, addmm_tf32, addmm_relu",
    ):
        ops.selector("conv")


@pytest.mark.parametrize("transposed_b", [False, True])
def test_the_persistent_tma_template_runs_in_the_interpreter(transposed_b: bool) -> None:
    configs = [Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2})]
    bias, a = torch.randn(40), torch.randn(48, 32)
    b = torch.randn(40, 32).t() if transposed_b else torch.randn(32, 40)
    choice = template(
        PERSISTENT_TMA_GEMM,
        configs=configs,
        arguments=("bias", "A", "B"),
        epilogue=lambda signature: ops.gemm._EPILOGUES["silu"],
        constants={"NUM_SMS": 3, "ALLOW_TF32": False},
    )
    selector = Selector(
        "tma", [extern(lambda bias, a, b: torch_addmm(bias, a, b, activation="silu"), name="torch"), choice]
    )
    selector.tune(bias, a, b)
    record = selector.last_selection
    assert record is not None
    assert all(r.result.ok for r in record.results), [(r.name, r.result.message) for r in record.results]
