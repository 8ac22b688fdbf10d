"""compile/interpreter.py: kernels written for GPUs (Liger-Kernel's and unsloth's ways) run in Triton's
interpreter with the results they give on a GPU, through a plain launch and through `kernelpick.autotune`;
Triton is left as it was; a kernel the interpreter cannot run fails naming its line."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.errors import InterpreterError
from triton.runtime.jit import JITFunction

import kernelpick
from kernelpick.compile.launch import interpret
from kernelpick.compile.target import specialize
from kernelpick.errors import InterpretationError, NoValidConfigs
from tests.compile import gpu_style_helpers, gpu_style_kernels
from tests.compile.gpu_style_kernels import (
    inline_asm_kernel,
    liger_cross_entropy_kernel,
    liger_geglu_tanh_kernel,
    liger_layer_norm_kernel,
    liger_rms_norm_kernel,
    liger_swiglu_kernel,
    unsloth_geglu_approx_kernel,
    unsloth_geglu_exact_kernel,
    unsloth_gemma_rms_norm_kernel,
    unsloth_rope_kernel,
)

Launch = Callable[..., Any]  # `interpret(kernel, ...)`, or an autotuned kernel's `[grid](...)`


def plain(kernel: Any) -> Launch:
    return lambda *args, grid, **kwargs: interpret(kernel, *args, grid=grid, **kwargs)


def tuned(kernel: Any, configs: list[triton.Config], key: list[str]) -> Launch:
    """A launch through `kernelpick.autotune`, which checks that every config ran."""
    tuner = kernelpick.autotune(configs, key=key)(kernel)

    def launch(*args: Any, grid: Any, **kwargs: Any) -> None:
        tuner[grid](*args, **kwargs)
        assert tuner.last_tuning is not None
        assert [r.status for r in tuner.last_tuning.results.values()] == ["ok"] * len(configs)

    return launch


def rms_norm(launch: Launch, x: torch.Tensor, w: torch.Tensor, llama: bool, **meta: Any) -> torch.Tensor:
    y, rstd = torch.empty_like(x), torch.empty(x.shape[0])
    mode = 0 if llama else -1
    launch(y, y.stride(0), x, x.stride(0), w, rstd, x.shape[1], 1e-6, 1.0, mode, grid=(x.shape[0],), **meta)
    return y


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_liger_style_rms_norm_with_libdevice_rsqrt_and_float_arguments(dtype: torch.dtype) -> None:
    x, w = torch.randn(4, 40).to(dtype), torch.randn(40).to(dtype)
    y = rms_norm(plain(liger_rms_norm_kernel), x, w, llama=True, BLOCK_SIZE=64)
    x32 = x.float()
    normed = (x32 * torch.rsqrt(x32.pow(2).mean(dim=1, keepdim=True) + 1e-6)).to(dtype)
    expected = normed.float() * (1.0 + w.float())
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(y.float(), expected, atol=tolerance, rtol=tolerance)


def layer_norm(
    launch: Launch, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, **meta: Any
) -> torch.Tensor:
    y, mean, rstd = torch.empty_like(x), torch.empty(x.shape[0]), torch.empty(x.shape[0])
    launch(y, y.stride(0), x, x.stride(0), w, b, mean, rstd, x.shape[1], 1e-5, grid=(x.shape[0],), **meta)
    torch.testing.assert_close(mean, x.mean(dim=1))
    return y


def test_a_float_argument_is_the_fp32_scalar_it_is_on_a_gpu() -> None:
    # `eps.to(tl.float32)`: a Python float has no `.to`.
    x, w, b = torch.randn(3, 50), torch.randn(50), torch.randn(50)
    y = layer_norm(plain(liger_layer_norm_kernel), x, w, b, BLOCK_SIZE=64)
    torch.testing.assert_close(y, F.layer_norm(x, (50,), w, b, eps=1e-5), atol=1e-5, rtol=1e-5)


@triton.jit
def store_float_kernel(out_ptr, value):
    tl.store(out_ptr, value.to(tl.float64))


def test_a_float_argument_has_fp32_precision_as_on_a_gpu() -> None:
    out = torch.zeros(1, dtype=torch.float64)
    interpret(store_float_kernel, out, 0.1, grid=(1,))
    assert out.item() == float(np.float32(0.1)) != 0.1


def test_swiglu_through_a_helper_whose_module_aliases_a_builtin() -> None:
    a, b = torch.randn(3, 33), torch.randn(3, 33)
    c = torch.empty_like(a)
    interpret(liger_swiglu_kernel, a, b, c, a.stride(0), 33, BLOCK_SIZE=64, grid=(3,))
    torch.testing.assert_close(c, F.silu(a) * b)


def test_geglu_with_libdevice_tanh_imported_by_name() -> None:
    a, b = torch.randn(3, 33), torch.randn(3, 33)
    c = torch.empty_like(a)
    interpret(liger_geglu_tanh_kernel, a, b, c, a.stride(0), 33, BLOCK_SIZE=64, grid=(3,))
    torch.testing.assert_close(c, F.gelu(a, approximate="tanh") * b)


def cross_entropy(
    launch: Launch, x: torch.Tensor, y: torch.Tensor, smoothing: float, softcap: float | None, **meta: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-row losses (mean reduction) and the gradient the kernel writes over `x`."""
    loss = torch.empty(x.shape[0])
    n_non_ignore = int((y != -100).sum())
    rows, n_cols = x.shape
    args = (x, x.stride(0), y, loss, n_cols, n_non_ignore, -100, smoothing, softcap or 0.0)
    launch(*args, REDUCTION="mean", HAS_SOFTCAPPING=softcap is not None, grid=(rows,), **meta)
    return loss, x


def cross_entropy_reference(
    x: torch.Tensor, y: torch.Tensor, smoothing: float, softcap: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.clone().requires_grad_()
    logits = softcap * torch.tanh(x / softcap) if softcap is not None else x
    n_non_ignore = int((y != -100).sum())
    losses = (
        F.cross_entropy(logits, y, reduction="none", ignore_index=-100, label_smoothing=smoothing)
        / n_non_ignore
    )
    losses.sum().backward()
    assert x.grad is not None
    return losses.detach(), x.grad


CROSS_ENTROPY_CASES = [(0.0, None), (0.1, None), (0.1, 30.0)]


@pytest.mark.parametrize(("smoothing", "softcap"), CROSS_ENTROPY_CASES)
def test_liger_style_cross_entropy_loss_and_gradient_in_place(
    smoothing: float, softcap: float | None
) -> None:
    x, y = 4 * torch.randn(5, 70), torch.tensor([3, -100, 69, 0, 12])
    expected_loss, expected_grad = cross_entropy_reference(x, y, smoothing, softcap)
    loss, grad = cross_entropy(
        plain(liger_cross_entropy_kernel), x.clone(), y, smoothing, softcap, BLOCK_SIZE=32
    )
    torch.testing.assert_close(loss, expected_loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad, expected_grad, atol=1e-6, rtol=1e-5)


def rope(
    launch: Launch, q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_heads: int, backward: bool
) -> None:
    seqlen, half = cos.shape
    grid = (q.shape[0], triton.cdiv(n_heads, 4))
    arguments = (q, q.stride(0), cos, cos.stride(0), sin, sin.stride(0), seqlen, 2 * half, n_heads, backward)
    launch(*arguments, grid=grid, BLOCK_SIZE=triton.next_power_of_2(half))


def test_unsloth_style_rope_rotates_in_place_and_its_backward_pass_undoes_it() -> None:
    n_heads, head_dim, seqlen = 6, 16, 5
    q = torch.randn(2 * seqlen, n_heads * head_dim)
    angles = torch.rand(seqlen, head_dim // 2) * 6
    cos, sin = torch.cos(angles), torch.sin(angles)
    rotated = q.clone()
    rope(plain(unsloth_rope_kernel), rotated, cos, sin, n_heads, backward=False)
    q1, q2 = q.view(2 * seqlen, n_heads, head_dim).split(head_dim // 2, dim=-1)
    c, s = cos.repeat(2, 1)[:, None, :], sin.repeat(2, 1)[:, None, :]
    expected = torch.cat([q1 * c - q2 * s, q2 * c + q1 * s], dim=-1).view_as(q)
    torch.testing.assert_close(rotated, expected)
    rope(plain(unsloth_rope_kernel), rotated, cos, sin, n_heads, backward=True)
    torch.testing.assert_close(rotated, q, atol=1e-5, rtol=1e-5)


def test_unsloth_style_gemma_rms_norm_with_tl_math_and_a_cast_alias() -> None:
    x, w = torch.randn(4, 40), torch.randn(40)
    y, r = torch.empty_like(x), torch.empty(4)
    launch = plain(unsloth_gemma_rms_norm_kernel)
    launch(y, y.stride(0), x, x.stride(0), w, w.stride(0), r, 1, 40, 1e-6, BLOCK_SIZE=64, grid=(4,))
    rstd = torch.rsqrt(x.pow(2).mean(dim=1) + 1e-6)
    torch.testing.assert_close(r, rstd)
    torch.testing.assert_close(y, x * rstd[:, None] * (w + 1.0))


def geglu(launch: Launch, e: torch.Tensor, g: torch.Tensor, **meta: Any) -> torch.Tensor:
    h = torch.empty_like(e)
    launch(e, g, h, e.numel(), grid=lambda m: (triton.cdiv(e.numel(), m["BLOCK_SIZE"]),), **meta)
    return h


@pytest.mark.parametrize(
    ("kernel", "approximate"), [(unsloth_geglu_exact_kernel, "none"), (unsloth_geglu_approx_kernel, "tanh")]
)
def test_unsloth_style_geglu_exact_and_approximate(kernel: Any, approximate: str) -> None:
    e, g = torch.randn(100), torch.randn(100)
    h = geglu(plain(kernel), e, g, BLOCK_SIZE=32)
    torch.testing.assert_close(h, F.gelu(e, approximate=approximate) * g)


BLOCKS = [triton.Config({"BLOCK_SIZE": 16}), triton.Config({"BLOCK_SIZE": 64})]
WARPS = [triton.Config({}, num_warps=1), triton.Config({}, num_warps=4)]


@pytest.mark.parametrize(("smoothing", "softcap"), CROSS_ENTROPY_CASES[1:])
def test_autotuned_cross_entropy_gives_the_untuned_results(smoothing: float, softcap: float | None) -> None:
    x, y = 4 * torch.randn(5, 70), torch.tensor([3, -100, 69, 0, 12])
    expected_loss, expected_grad = cross_entropy_reference(x, y, smoothing, softcap)
    launch = tuned(liger_cross_entropy_kernel, BLOCKS, key=["n_cols"])
    loss, grad = cross_entropy(launch, x.clone(), y, smoothing, softcap)
    torch.testing.assert_close(loss, expected_loss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad, expected_grad, atol=1e-6, rtol=1e-5)


def test_autotuned_norms_and_activations() -> None:
    x, w, b = torch.randn(4, 40), torch.randn(40), torch.randn(40)
    y = rms_norm(tuned(liger_rms_norm_kernel, WARPS, key=["n_cols"]), x, w, llama=True, BLOCK_SIZE=64)
    torch.testing.assert_close(y, x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * (1.0 + w))
    y = layer_norm(tuned(liger_layer_norm_kernel, WARPS, key=["n_cols"]), x, w, b, BLOCK_SIZE=64)
    torch.testing.assert_close(y, F.layer_norm(x, (40,), w, b, eps=1e-5), atol=1e-5, rtol=1e-5)
    e, g = torch.randn(100), torch.randn(100)
    h = geglu(tuned(unsloth_geglu_approx_kernel, BLOCKS, key=["n_elements"]), e, g)
    torch.testing.assert_close(h, F.gelu(e, approximate="tanh") * g)


def snapshot() -> dict[str, Any]:
    """What kernelpick patches for a launch: kernel and helper module globals, libdevice, the interpreter."""
    import triton.language.extra.cuda.libdevice as cuda_libdevice
    import triton.language.extra.libdevice as stubs

    state: dict[str, Any] = {}
    for module in (
        gpu_style_kernels,
        gpu_style_helpers,
        stubs,
        cuda_libdevice,
        tl,
        tl.core,
        tl.math,
        interpreter,
    ):
        state.update({f"{module.__name__}.{name}": value for name, value in vars(module).items()})
    state["create_extern_elementwise"] = interpreter.InterpreterBuilder.create_extern_elementwise
    state["JITFunction.__call__"] = JITFunction.__call__
    return state


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    # Names added are left out: Triton's interpreter puts its own into a kernel's module the first
    # time it rewrites a kernel of it, and leaves them.
    return sorted(name for name in before if after.get(name) is not before[name])


def test_nothing_stays_patched_after_a_launch_and_libdevice_kernels_still_compile() -> None:
    before = snapshot()
    x, w = torch.randn(2, 40), torch.randn(40)
    rms_norm(plain(liger_rms_norm_kernel), x, w, llama=True, BLOCK_SIZE=64)
    geglu(plain(unsloth_geglu_approx_kernel), torch.randn(64), torch.randn(64), BLOCK_SIZE=32)
    with pytest.raises(InterpretationError):
        interpret(
            inline_asm_kernel, torch.zeros(8), torch.zeros(8, dtype=torch.int32), 8, BLOCK_SIZE=8, grid=(1,)
        )
    assert changes(before, snapshot()) == []
    assert gpu_style_kernels.rsqrt.__module__ == "triton.language.extra.libdevice"  # the stub, as imported
    e = torch.randn(64)
    ttir = str(specialize(unsloth_geglu_approx_kernel, (e, e, e, 64), {"BLOCK_SIZE": 32}).lower("ttir"))
    assert "__nv_tanhf" in ttir  # the compiler still maps the stub to CUDA's libdevice


def kernel_line(kernel: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_construct_the_interpreter_cannot_run_is_named_with_its_line() -> None:
    x, out = torch.zeros(8), torch.zeros(8, dtype=torch.int32)
    with pytest.raises(InterpretationError) as raised:
        interpret(inline_asm_kernel, x, out, 8, BLOCK_SIZE=8, grid=(1,))
    error = raised.value
    asm_line = kernel_line(gpu_style_kernels._pack_halves, "inline_asm_elementwise")
    call_line = kernel_line(inline_asm_kernel, "_pack_halves(")
    message = str(error)
    assert message.startswith(
        f"kernel `inline_asm_kernel` failed in Triton {triton.__version__}'s interpreter"
    )
    assert f"{gpu_style_kernels.__file__}:{asm_line}" in message
    assert f"in helper `_pack_halves` (called from line {call_line})" in message
    assert "cannot run `tl.inline_asm_elementwise`: run the kernel on a GPU" in message
    assert (error.kernel, error.filename, error.line) == (
        "inline_asm_kernel",
        gpu_style_kernels.__file__,
        asm_line,
    )
    assert isinstance(error, InterpreterError)  # what the interpreter raised before, for code catching it


@triton.jit
def erfinv_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, gpu_style_kernels.libdevice.erfinv(tl.load(x_ptr + offsets)))


def test_a_libdevice_function_without_an_interpreted_version_is_named() -> None:
    with pytest.raises(
        InterpretationError, match=r"libdevice's `__nv_erfinvf` has no interpreted version"
    ) as raised:
        interpret(erfinv_kernel, torch.zeros(4), BLOCK=4, grid=(1,))
    assert raised.value.line == kernel_line(erfinv_kernel, "erfinv(")


def test_an_autotuning_whose_configs_all_fail_in_the_interpreter_names_the_line() -> None:
    tuner = kernelpick.autotune(BLOCKS, key=["n"])(inline_asm_kernel)
    x, out = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    with pytest.raises(NoValidConfigs) as raised:
        tuner[lambda m: (triton.cdiv(64, m["BLOCK_SIZE"]),)](x, out, 64)
    line = kernel_line(gpu_style_kernels._pack_halves, "inline_asm_elementwise")
    assert f"{gpu_style_kernels.__file__}:{line}" in str(raised.value)
