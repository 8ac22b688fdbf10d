"""compile/target.py: kernels bound to launch arguments and lowered for an explicit GPU target, no GPU needed."""

from __future__ import annotations

import re

import pytest
import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import FakeTensorMode
from triton.backends.compiler import GPUTarget
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.compile.target import (
    FALLBACK_TARGET,
    as_jit_function,
    bind_arguments,
    default_target,
    specialize,
)
from kernelpick.errors import AnalysisError


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 64):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


@triton.jit
def copy_tile(in_desc, out_desc):
    out_desc.store([0, 0], in_desc.load([0, 0]))


def ttir(kernel: object, args: tuple[object, ...], kwargs: dict[str, object] | None = None) -> str:
    return str(specialize(kernel, args, kwargs).lower("ttir"))


# -- bind_arguments -------------------------------------------------------------------------------


def test_arguments_are_bound_by_name_with_defaults_and_options_after() -> None:
    bound = bind_arguments(add_kernel, ("x", "y"), {"out_ptr": "o", "n": 10, "num_warps": 8})
    assert bound == {"x_ptr": "x", "y_ptr": "y", "out_ptr": "o", "n": 10, "BLOCK": 64, "num_warps": 8}
    assert list(bound) == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK", "num_warps"]


def test_a_given_value_wins_over_the_default() -> None:
    assert bind_arguments(add_kernel, ("x", "y", "o", 10), {"BLOCK": 128})["BLOCK"] == 128


def test_missing_arguments_are_listed() -> None:
    with pytest.raises(
        AnalysisError, match=r"kernel `add_kernel` takes 5 arguments, got 2: missing `out_ptr`, `n`$"
    ):
        bind_arguments(add_kernel, ("x", "y"), {})


def test_too_many_positional_arguments() -> None:
    with pytest.raises(AnalysisError, match="kernel `add_kernel` takes 5 arguments, got 6 positional ones"):
        bind_arguments(add_kernel, ("x", "y", "o", 10, 64, "extra"), {})


def test_an_argument_given_twice_is_named() -> None:
    with pytest.raises(
        AnalysisError, match=r"argument\(s\) \['n', 'x_ptr'\] given both by position and by name"
    ):
        bind_arguments(add_kernel, ("x", "y", "o", 10), {"x_ptr": "x2", "n": 11})


# -- specialize and lower -------------------------------------------------------------------------


def test_without_a_gpu_the_target_is_a_hopper_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: its own target is used")
    assert default_target() == FALLBACK_TARGET == GPUTarget("cuda", 90, 32)
    assert specialize(add_kernel, (torch.ones(4),) * 3 + (4,)).target == FALLBACK_TARGET


def test_cpu_tensors_lower_to_ttir_with_their_dtypes() -> None:
    x = torch.ones(100, dtype=torch.float16)
    text = ttir(add_kernel, (x, x, x, 100), {"BLOCK": 32})
    assert "tt.func public @add_kernel" in text
    assert "!tt.ptr<f16>" in text
    assert "tensor<32x" in text


@pytest.mark.parametrize(("n", "specialized"), [(64, "tt.divisibility = 16"), (65, None)])
def test_integers_are_specialized_like_triton_does(n: int, specialized: str | None) -> None:
    x = torch.ones(100)
    text = ttir(add_kernel, (x, x, x, n))
    signature = next(line for line in text.splitlines() if "tt.func public" in line)
    n_argument = signature.split("%n:")[1].split("loc(")[0]
    assert (specialized in n_argument) if specialized else ("divisibility" not in n_argument)


def test_meta_tensors_need_no_memory() -> None:
    x = torch.empty(1 << 40, dtype=torch.bfloat16, device="meta")
    assert "!tt.ptr<bf16>" in ttir(add_kernel, (x, x, x, 1 << 20))


def test_fake_tensors_inside_and_outside_their_mode() -> None:
    with FakeTensorMode():
        x = torch.empty(100, dtype=torch.float16)
        assert "!tt.ptr<f16>" in ttir(add_kernel, (x, x, x, 100))
    assert "!tt.ptr<f16>" in ttir(add_kernel, (x, x, x, 100))


@pytest.mark.parametrize("device", ["cpu", "meta", "fake"])
def test_tensor_descriptors_lower_with_their_block_and_dtype(device: str) -> None:
    if device == "fake":
        with FakeTensorMode():
            base = torch.empty(256, 128, dtype=torch.float16)
    else:
        base = torch.empty(256, 128, dtype=torch.float16, device=device)
    descriptor = TensorDescriptor.from_tensor(base, [64, 32])
    text = ttir(copy_tile, (descriptor, descriptor))
    assert "tt.descriptor_load" in text and "tt.descriptor_store" in text
    # Triton 3.9 prints !tt.tensordesc<64x32xf16>, 3.6 !tt.tensordesc<tensor<64x32xf16>>
    assert re.search(r"!tt\.tensordesc<(tensor<)?64x32xf16>", text)


def test_compile_options_reach_the_compiler() -> None:
    x = torch.ones(100)
    assert specialize(add_kernel, (x, x, x, 100), {"num_warps": 8}).options.num_warps == 8


def test_source_stage_and_unknown_stages() -> None:
    x = torch.ones(100)
    specialization = specialize(add_kernel, (x, x, x, 100))
    assert "tt.func public @add_kernel" in str(specialization.lower("source"))
    with pytest.raises(ValueError, match=r"unknown stage 'ptxx'; Triton's stages here are \['ttir', 'ttgir'"):
        specialization.lower("ptxx")


def test_bad_arguments_are_analysis_errors() -> None:
    with pytest.raises(AnalysisError, match="missing `out_ptr`, `n`"):
        specialize(add_kernel, (torch.ones(4), torch.ones(4)))


# -- as_jit_function ------------------------------------------------------------------------------


def test_a_jit_function_is_itself() -> None:
    assert as_jit_function(add_kernel) is add_kernel


def test_kernels_decorated_under_triton_interpret_lower_as_their_compilable_twin() -> None:
    interpreted = InterpretedFunction(add_kernel.fn)  # what triton.jit makes under TRITON_INTERPRET=1
    twin = as_jit_function(interpreted)
    assert isinstance(twin, JITFunction) and twin is as_jit_function(interpreted)
    assert twin.arg_names == add_kernel.arg_names and twin.cache_key == add_kernel.cache_key


def test_other_objects_are_not_kernels() -> None:
    with pytest.raises(AnalysisError, match=r"expected a @triton\.jit function, got function"):
        as_jit_function(add_kernel.fn)


def test_a_tensor_given_for_the_kernel_is_described_not_printed() -> None:
    with pytest.raises(AnalysisError) as raised:
        as_jit_function(torch.arange(100_000.0))
    message = str(raised.value)
    assert "got Tensor: a float32 tensor of size [100000] on cpu" in message
    assert "tensor(" not in message and len(message) < 200
