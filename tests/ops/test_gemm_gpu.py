"""GPU checks of kernelpick.ops (marked `gpu`: skipped without one): every template config compiles,
verifies against cuBLAS and runs; TMA configs appear on sm_90+."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from kernelpick import ops
from kernelpick.ops.gemm import torch_addmm

pytestmark = pytest.mark.gpu


def failures(name: str) -> dict[str, str]:
    """Choices that failed for a reason other than needing more shared memory than the GPU has."""
    record = ops.selector(name).last_selection
    assert record is not None
    return {
        r.name: f"{r.result.status}: {r.result.message[:300]}"
        for r in record.candidates
        if r.result.status not in ("ok", "out_of_resources")
    }


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("transposed", [False, True])
def test_mm_on_a_gpu(dtype: torch.dtype, transposed: bool) -> None:
    a = torch.randn(256, 512, device="cuda", dtype=dtype)
    b = (
        torch.randn(384, 512, device="cuda", dtype=dtype).t()
        if transposed
        else torch.randn(512, 384, device="cuda", dtype=dtype)
    )
    torch.testing.assert_close(ops.mm(a, b), torch.mm(a, b), rtol=2e-2, atol=2e-1)
    assert failures("mm") == {}
    record = ops.selector("mm").last_selection
    assert record is not None
    if torch.cuda.get_device_capability() >= (9, 0):
        assert any(r.name.startswith("triton_mm_tma") for r in record.candidates)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "silu"])
def test_addmm_on_a_gpu(activation: str | None) -> None:
    bias = torch.randn(384, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(128, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(384, 512, device="cuda", dtype=torch.bfloat16).t()
    expected = torch_addmm(bias, a, b, activation=activation)
    torch.testing.assert_close(ops.addmm(bias, a, b, activation=activation), expected, rtol=2e-2, atol=2e-1)
    assert failures("addmm" if activation is None else f"addmm_{activation}") == {}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cublaslt_gelu_epilogue_is_offered_and_verified_in_half_precision_only(dtype: torch.dtype) -> None:
    # (float32 goes to `addmm_gelu` while TF32 is off, torch's default)
    bias = torch.randn(384, device="cuda", dtype=dtype)
    a = torch.randn(64, 512, device="cuda", dtype=dtype)
    b = torch.randn(384, 512, device="cuda", dtype=dtype).t()
    ops.addmm(bias, a, b, activation="gelu")
    record = ops.selector("addmm_gelu").last_selection
    assert record is not None
    results = {r.name: r.result for r in record.candidates}
    if dtype is torch.bfloat16:
        assert results["torch._addmm_activation[gelu_tanh]"].ok
    else:
        assert "torch._addmm_activation[gelu_tanh]" not in results


def test_bmm_on_a_gpu() -> None:
    a = torch.randn(4, 128, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(4, 256, 192, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ops.bmm(a, b), torch.bmm(a, b), rtol=2e-2, atol=2e-1)
    assert failures("bmm") == {}


def test_float32_with_tf32_allowed_goes_to_the_tf32_selector() -> None:
    a = torch.randn(256, 512, device="cuda")
    b = torch.randn(512, 384, device="cuda")
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.testing.assert_close(ops.mm(a, b), a.double().mm(b.double()).float(), rtol=2e-2, atol=2e-1)
        record = ops.selector("mm_tf32").last_selection
        assert record is not None and failures("mm_tf32") == {}
        assert record.selector == "kernelpick.ops.mm_tf32"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


@pytest.fixture
def full_precision_cublas() -> Iterator[None]:
    """cuBLAS adding its split-K partial sums in float32, as the kernels do: by default torch lets it
    add them in bfloat16 or float16, 0.41 off at 3 x 4100 on an H100, and torch.mm may be the pick."""
    matmul = torch.backends.cuda.matmul
    before = (matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction)
    matmul.allow_bf16_reduced_precision_reduction = matmul.allow_fp16_reduced_precision_reduction = False
    yield
    matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction = before


@pytest.mark.usefixtures("full_precision_cublas")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("m", [1, 3, 16])
def test_decode_sizes_on_a_gpu_compile_and_verify_every_skinny_config(dtype: torch.dtype, m: int) -> None:
    # N and K multiples of no tile; N small enough that some configs split K
    bias = torch.randn(1000, device="cuda", dtype=dtype)
    a = torch.randn(m, 4100, device="cuda", dtype=dtype)
    weight = torch.randn(1000, 4100, device="cuda", dtype=dtype)
    # references in float32, rounded once as the kernels round
    for b in (weight.t(), weight.t().contiguous()):
        expected_mm = torch.mm(a.float(), b.float()).to(dtype)
        torch.testing.assert_close(ops.mm(a, b), expected_mm, rtol=2e-2, atol=2e-1)
        assert failures("mm") == {}
        record = ops.selector("mm").last_selection
        assert record is not None
        decode = [r for r in record.candidates if r.name.startswith("triton_mm_decode")]
        assert decode and any("SPLIT_K=1," not in r.name for r in decode)
        # in the input dtype the product would be rounded before the bias cancels most of it (0.44 off
        # at 16 x 4100 in bfloat16)
        expected = torch_addmm(bias.float(), a.float(), b.float(), activation="gelu").to(dtype)
        torch.testing.assert_close(ops.addmm(bias, a, b, activation="gelu"), expected, rtol=2e-2, atol=2e-1)
        assert failures("addmm_gelu") == {}
    batched_a, batched_b = a.expand(3, m, 4100).contiguous(), weight.t().expand(3, 4100, 1000).contiguous()
    torch.testing.assert_close(
        ops.bmm(batched_a, batched_b),
        torch.bmm(batched_a.float(), batched_b.float()).to(dtype),
        rtol=2e-2,
        atol=2e-1,
    )
    assert failures("bmm") == {}


@pytest.mark.parametrize("m", [1, 16, 256])
def test_every_template_computes_right_on_later_calls_too(m: int) -> None:
    # A template's first call goes through Triton's run; later ones launch the compiled kernel
    # directly (compile/launch.py, FixedLaunch). Each template choice is called three times on new
    # values, by its own bound callable, and checked each time.
    a = torch.randn(m, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 384, device="cuda", dtype=torch.bfloat16)
    selector = ops.selector("mm")
    # tune's own record: `last_selection` is another key's when an earlier test selected this one
    record = selector.tune(a, b)
    signature = record.signature
    worked = {r.name for r in record.candidates if r.result.ok}
    templates = [c for c in selector.expand(signature) if c.name.startswith("triton_mm") and c.name in worked]
    assert templates
    for choice in templates:
        call = choice.callable_for(signature)
        for index in range(3):
            x, y = torch.randn_like(a), torch.randn_like(b)
            got, want = call(x, y), torch.mm(x, y)
            error = (got.float() - want.float()).abs().max().item()
            torch.testing.assert_close(
                got, want, rtol=2e-2, atol=2e-1, msg=f"{choice.name}, call {index}: max error {error}"
            )
