"""compile/libdevice.py: libdevice's functions, which Triton's interpreter lacks, give what a GPU gives."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.cuda.libdevice as cuda_libdevice
from triton.language.extra import libdevice

from kernelpick.compile.launch import interpret
from kernelpick.compile.libdevice import FUNCTIONS, extern_elementwise, name_of
from kernelpick.errors import InterpretationError

SYMBOLS = set(re.findall(r'"(__nv_\w+)"', inspect.getsource(cuda_libdevice)))


def test_every_function_implemented_is_one_libdevice_has() -> None:
    reached = {name_of(symbol) for symbol in SYMBOLS}
    assert sorted(set(FUNCTIONS) - reached) == []
    assert name_of("__nv_tanhf") == "tanh" and name_of("__nv_erff") == "erf" and name_of("__nv_erf") == "erf"


X = torch.linspace(-3, 3, 61)
POSITIVE = torch.linspace(0.1, 4, 40)

UNARY: list[tuple[str, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("__nv_tanhf", X, torch.tanh),
    ("__nv_erff", X, torch.erf),
    ("__nv_erfcf", X, torch.erfc),
    ("__nv_rsqrtf", POSITIVE, torch.rsqrt),
    ("__nv_expf", X, torch.exp),
    ("__nv_fast_expf", X, torch.exp),
    ("__nv_expm1f", X, torch.expm1),
    ("__nv_exp10f", X, lambda x: torch.pow(10.0, x)),
    ("__nv_log1pf", POSITIVE, torch.log1p),
    ("__nv_lgammaf", POSITIVE, torch.lgamma),
    ("__nv_normcdff", X, torch.special.ndtr),
    ("__nv_sinpif", X, lambda x: torch.sin(math.pi * x)),
    ("__nv_tanh", X.double(), torch.tanh),
]


@pytest.mark.parametrize(("symbol", "x", "reference"), UNARY, ids=[case[0] for case in UNARY])
def test_unary_functions_match_torch(
    symbol: str, x: torch.Tensor, reference: Callable[..., torch.Tensor]
) -> None:
    result = extern_elementwise(symbol, [x.numpy()], x.numpy().dtype)
    assert result.dtype == x.numpy().dtype
    torch.testing.assert_close(torch.from_numpy(result), reference(x), atol=1e-5, rtol=1e-5)


BINARY: list[tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = [
    ("__nv_powf", torch.pow),
    ("__nv_atan2f", torch.atan2),
    ("__nv_hypotf", torch.hypot),
    ("__nv_fmodf", torch.fmod),
    ("__nv_copysignf", torch.copysign),
    ("__nv_fdiv_rn", torch.div),
]


@pytest.mark.parametrize(("symbol", "reference"), BINARY, ids=[case[0] for case in BINARY])
def test_binary_functions_match_torch(symbol: str, reference: Callable[..., torch.Tensor]) -> None:
    x, y = POSITIVE, torch.linspace(-2, 2, 40)
    result = extern_elementwise(symbol, [x.numpy(), y.numpy()], np.dtype(np.float32))
    torch.testing.assert_close(torch.from_numpy(result), reference(x, y))


def test_round_takes_halves_away_from_zero_as_c_does() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 3.0], dtype=np.float32)
    rounded = extern_elementwise("__nv_roundf", [x], np.dtype(np.float32))
    assert rounded.tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, 3.0]


def test_remainder_is_ieee_and_fma_rounds_once() -> None:
    x, y = np.array([5.0, -5.0, 7.5], dtype=np.float32), np.array([3.0, 3.0, 2.0], dtype=np.float32)
    remainder = extern_elementwise("__nv_remainderf", [x, y], np.dtype(np.float32))
    assert (
        remainder.tolist()
        == [math.remainder(a, b) for a, b in zip(x.tolist(), y.tolist())]
        == [-1.0, 1.0, -0.5]
    )
    a = np.array([1 + 2**-12], dtype=np.float32)
    c = np.array([-(1 + 2**-11)], dtype=np.float32)
    # a * a - (1 + 2^-11) is 2^-24, which an fp32 product rounded first would lose.
    assert extern_elementwise("__nv_fmaf", [a, a, c], np.dtype(np.float32)).tolist() == [2**-24]


def test_predicates_give_the_integers_libdevice_returns() -> None:
    x = np.array([1.0, np.nan, np.inf, -0.0], dtype=np.float32)
    assert extern_elementwise("__nv_isnanf", [x], np.dtype(np.int32)).tolist() == [0, 1, 0, 0]
    assert extern_elementwise("__nv_isinff", [x], np.dtype(np.int32)).tolist() == [0, 0, 1, 0]
    assert extern_elementwise("__nv_signbitf", [x], np.dtype(np.int32)).tolist() == [0, 0, 0, 1]


@pytest.mark.parametrize("symbol", ["__nv_fadd_rz", "__nv_popc", "__nv_erfinvf"])
def test_a_symbol_without_a_numpy_version_is_named(symbol: str) -> None:
    with pytest.raises(NotImplementedError, match=f"libdevice's `{symbol}` has no interpreted version"):
        extern_elementwise(symbol, [np.zeros(2, dtype=np.float32)], np.dtype(np.float32))


@triton.jit
def libdevice_kernel(x_ptr, pow_ptr, nan_ptr, log_ptr, exponent, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.store(pow_ptr + offsets, libdevice.pow(x, exponent))
    tl.store(nan_ptr + offsets, libdevice.isnan(x))
    tl.store(log_ptr + offsets, cuda_libdevice.log1p(x))  # the backend's module, as some kernels name it


def test_a_kernel_gets_broadcast_scalars_and_the_result_types_of_a_gpu() -> None:
    x = torch.tensor([1.0, 4.0, float("nan"), 9.0])
    powered, nans, logs = torch.empty(4), torch.zeros(4, dtype=torch.int32), torch.empty(4)
    interpret(libdevice_kernel, x, powered, nans, logs, 1.5, BLOCK=4, grid=(1,))
    torch.testing.assert_close(powered, x.pow(1.5), equal_nan=True)
    assert nans.tolist() == [0, 0, 1, 0]
    torch.testing.assert_close(logs, torch.log1p(x), equal_nan=True)


@triton.jit
def half_tanh_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, libdevice.tanh(tl.load(x_ptr + offsets)))


def test_argument_types_libdevice_lacks_fail_as_on_a_gpu() -> None:
    # CUDA's libdevice has no fp16 tanh: the compiler refuses the kernel (a KeyError of the argument
    # types, in Triton's `extern_elementwise`), and so does the interpreter.
    with pytest.raises(InterpretationError, match=r"KeyError: \(triton.language.float16\)") as raised:
        interpret(half_tanh_kernel, torch.zeros(4, dtype=torch.float16), BLOCK=4, grid=(1,))
    assert "libdevice.tanh(" in str(raised.value)


def test_numpy_warnings_are_not_raised_for_values_a_gpu_takes_silently() -> None:
    x = np.array([0.0, -1.0], dtype=np.float32)
    with np.errstate(all="raise"):
        result: Any = extern_elementwise("__nv_rsqrtf", [x], np.dtype(np.float32))
    assert result[0] == np.inf and np.isnan(result[1])
