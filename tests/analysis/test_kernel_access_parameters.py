"""analysis/kernel_access.py: mapping TTIR parameters back to kernel arguments."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton.language as tl
from access_corpus import copy, descriptor, f32, host_descriptors, scalars_and_none, tuple_argument
from corpus_support import TRITON_ELEMENT_TYPES, triton_typed
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.analysis.kernel_access import ttir_parameter_names
from kernelpick.compile.target import specialize


def test_constexprs_are_dropped() -> None:
    assert ttir_parameter_names(specialize(copy, (f32(), f32(), 8), {"BLOCK": 16})) == ["x_ptr", "y_ptr", "n"]


def test_value_one_and_none_become_constants() -> None:
    names = ttir_parameter_names(specialize(copy, (f32(), f32(), 1), {"BLOCK": 16}))
    assert names == ["x_ptr", "y_ptr"]
    names = ttir_parameter_names(specialize(scalars_and_none, (f32(), f32(), 2.0, None, True), {"BLOCK": 16}))
    assert names == ["x_ptr", "y_ptr", "alpha", "flag"]


def test_host_descriptor_expands_to_descriptor_shape_and_strides() -> None:
    names = ttir_parameter_names(specialize(host_descriptors, (descriptor(), descriptor()), {}))
    assert names == ["a_desc"] * 5 + ["b_desc"] * 5


def test_tuple_argument_expands_to_its_elements() -> None:
    assert ttir_parameter_names(specialize(tuple_argument, ((f32(), f32()), 5), {})) == ["pair", "pair", "n"]


@pytest.mark.parametrize("dtype", TRITON_ELEMENT_TYPES, ids=str)
def test_a_pointer_to_any_element_type_is_one_parameter(dtype: tl.dtype) -> None:
    """fp8 types included: counting them once asked a stand-in IR builder for `options.supported_fp8_dtypes`."""
    spec = specialize(copy, (triton_typed(dtype), triton_typed(dtype), 8), {"BLOCK": 16})
    assert ttir_parameter_names(spec) == ["x_ptr", "y_ptr", "n"]


def test_a_descriptor_of_fp8_elements_expands_like_any_other() -> None:
    block = descriptor()
    fp8 = TensorDescriptor.from_tensor(
        torch.empty(64, 64, dtype=torch.float8_e4m3fn, device="meta"), [16, 16]
    )
    names = ttir_parameter_names(specialize(host_descriptors, (fp8, block), {}))
    assert names == ["a_desc"] * 5 + ["b_desc"] * 5


def test_a_triton_type_that_needs_the_ir_value_itself_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """No count is guessed: a type that does more than store its IR value raises (the analysis turns that into
    a conservative answer, see test_kernel_access.py)."""

    real = tl.pointer_type._unflatten_ir

    def asks_its_value(self: tl.dtype, handles: Any, cursor: int) -> tuple[Any, int]:
        handles[cursor].get_type()  # as a later release might: code generation gives it a real IR value
        return real(self, handles, cursor)

    monkeypatch.setattr(tl.pointer_type, "_unflatten_ir", asks_its_value)
    with pytest.raises(AttributeError, match="get_type"):
        ttir_parameter_names(specialize(copy, (f32(), f32(), 8), {"BLOCK": 16}))
