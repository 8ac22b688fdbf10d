"""kernelpick.ops.scaled_mm under torch.compile, torch.export and fake tensors: one operator node,
whose selection happens when the program runs, and whose fake implementation checks the arguments."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelpick import ops
from kernelpick.engine.record import SelectionRecord
from kernelpick.errors import ArgumentError

FP8 = torch.float8_e4m3fn
# Sizes no other test uses, so that the signatures here are tuned here.
K, N = 96, 32
SELECTOR = "scaled_mm_bias_bf16"


class Fp8Linear(torch.nn.Module):
    """A linear layer with an fp8 weight and per-tensor scales, quantizing its input on the fly."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(N, K, generator=generator)
        self.register_buffer("weight", (weight / (weight.abs().max() / 448)).to(FP8))
        self.register_buffer("weight_scale", weight.abs().max() / 448)
        self.register_buffer("bias", torch.randn(N, generator=generator).to(torch.bfloat16))

    def quantized(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = x.abs().amax() / 448
        return (x / scale).to(FP8), scale.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x8, scale = self.quantized(x)
        return ops.scaled_mm(
            x8, self.weight.t(), scale, self.weight_scale, self.bias, out_dtype=torch.bfloat16
        )

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        x8, scale = self.quantized(x)
        return torch._scaled_mm(
            x8, self.weight.t(), scale, self.weight_scale, self.bias, out_dtype=torch.bfloat16
        )


def selections(rows: int) -> list[SelectionRecord]:
    return [r for r in ops.selector(SELECTOR).records.values() if r.signature.tensor(0).size == (rows, K)]


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_a_compiled_fp8_layer_is_one_graph_equal_to_eager(backend: str) -> None:
    layer, x = Fp8Linear(), torch.randn(10, K, generator=torch.Generator().manual_seed(1))
    expected = layer.reference(x)
    torch.testing.assert_close(layer(x), expected)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    compiled = torch.compile(layer, backend=counter, fullgraph=True)
    torch.testing.assert_close(compiled(x), expected)
    assert counter.frame_count == 1, "one graph: no graph break"


def test_the_compiled_graph_calls_the_operator_and_selects_when_it_runs() -> None:
    layer, x = Fp8Linear(), torch.randn(11, K)
    assert not selections(11)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(layer, backend=counter, fullgraph=True)
    torch.testing.assert_close(compiled(x), layer.reference(x))
    assert "torch.ops.kernelpick.scaled_mm" in counter.graphs[0].code
    assert len(selections(11)) == 1


def test_an_exported_fp8_layer_selects_for_each_size_it_runs_at() -> None:
    layer = Fp8Linear()
    m = torch.export.Dim("m", min=2, max=64)
    exported = torch.export.export(layer, (torch.randn(9, K),), dynamic_shapes=({0: m},))
    assert "torch.ops.kernelpick.scaled_mm.default" in exported.graph_module.code
    for rows in (9, 6):
        assert not selections(rows), "exporting selects nothing"
    for rows in (9, 6):
        x = torch.randn(rows, K)
        torch.testing.assert_close(exported.module()(x), layer.reference(x))
        assert len(selections(rows)) == 1


def test_fake_and_meta_tensors_get_the_output_without_selecting_and_wrong_ones_are_refused() -> None:
    before = len(ops.selector(SELECTOR).records)
    with FakeTensorMode():
        a, w = torch.empty(33, K, dtype=FP8), torch.empty(N, K, dtype=FP8)
        scale_a, scale_b, bias = torch.empty(33, 1), torch.empty(1, N), torch.empty(N, dtype=torch.bfloat16)
        out = ops.scaled_mm(a, w.t(), scale_a, scale_b, bias, out_dtype=torch.bfloat16)
        assert out.shape == (33, N) and out.stride() == (N, 1) and out.dtype == torch.bfloat16
        with pytest.raises(ArgumentError, match="row-major a and a column-major b"):
            ops.scaled_mm(a, w.t().contiguous(), scale_a, scale_b, bias, out_dtype=torch.bfloat16)
        with pytest.raises(ArgumentError, match="needs out_dtype="):
            ops.scaled_mm(a, w.t(), scale_a, scale_b)
    meta = torch.ops.kernelpick.scaled_mm(
        torch.empty(33, K, dtype=FP8, device="meta"),
        torch.empty(N, K, dtype=FP8, device="meta").t(),
        torch.empty((), device="meta"),
        torch.empty((), device="meta"),
        out_dtype=torch.float32,
    )
    assert meta.shape == (33, N) and meta.dtype == torch.float32 and meta.is_meta
    assert len(ops.selector(SELECTOR).records) == before


def test_eager_calls_skip_the_dispatcher() -> None:
    layer, x = Fp8Linear(), torch.randn(12, K)
    layer(x)
    with torch.profiler.profile() as profile:
        layer(x)
    assert "kernelpick::scaled_mm" not in [event.name for event in profile.events()]


def test_a_compiled_fp8_layer_calls_its_library_pick_itself() -> None:
    from tests.ops.test_gemm_traced import aot_graphs

    layer, x = Fp8Linear(), torch.randn(13, K)
    codes: list[str] = []
    torch._dynamo.reset()
    compiled = torch.compile(layer, backend=aot_graphs(codes), fullgraph=True)
    torch.testing.assert_close(compiled(x), layer.reference(x))
    [code] = codes
    [selection] = selections(13)  # tuned while compiling
    assert selection.best == "torch._scaled_mm[bias]"  # on this CPU, where Triton runs interpreted
    assert "torch.ops.aten._scaled_mm.default" in code and "kernelpick" not in code, code
