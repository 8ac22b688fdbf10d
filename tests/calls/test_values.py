"""calls/values.py: a call's arguments and grid as data, made again with the same layout on a device."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick.calls.values import VALUES_LIMIT, Unrecordable, decode, encode, grid_data, grid_of
from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_generator

CPU = torch.device("cpu")


def made_again(value: object) -> object:
    data = json.loads(json.dumps(encode(value, "argument 0")))  # through the file's JSON
    return decode(data, CPU, example_generator(CPU))


def test_a_tensor_is_made_again_with_its_dtype_layout_offset_and_alignment() -> None:
    base = torch.randn(64, 48)
    for tensor in (base, base.t(), base[3:, 1::2], base.view(-1)[1:]):  # the last starts misaligned
        again = made_again(tensor)
        assert isinstance(again, torch.Tensor)
        assert TensorSpec.of(again) == TensorSpec.of(tensor)
        assert not torch.equal(again, tensor)  # random values: the caller's data is not recorded


def test_small_integer_tensors_keep_their_values_and_large_ones_are_zeros() -> None:
    index = torch.randperm(100).to(torch.int32)[::2]  # a strided view: its storage is recorded
    again = made_again(index)
    assert isinstance(again, torch.Tensor)
    assert torch.equal(again, index) and again.stride() == (2,)
    mask = torch.rand(10) < 0.5
    assert torch.equal(made_again(mask), mask)  # type: ignore[arg-type]
    large = torch.arange(VALUES_LIMIT + 1)
    zeros = made_again(large)
    assert isinstance(zeros, torch.Tensor) and zeros.dtype == torch.int64
    assert zeros.shape == large.shape and not zeros.any()


def test_other_arguments_are_made_again_as_they_were() -> None:
    values = [None, True, 3, 2.5, "name", (1, (2, "x")), [4, 5], torch.bfloat16, tl.float16]
    assert [made_again(v) for v in values] == values
    assert type(made_again((1, 2))) is tuple and type(made_again([1, 2])) is list


def test_a_tensor_descriptor_is_made_again_over_a_tensor_of_its_own() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    descriptor = TensorDescriptor.from_tensor(torch.randn(64, 32)[:, :16], [16, 8])
    again = made_again(descriptor)
    assert isinstance(again, TensorDescriptor)
    assert TensorSpec.of(again.base) == TensorSpec.of(descriptor.base)
    assert (tuple(again.shape), tuple(again.strides), again.block_shape) == ((64, 16), (32, 1), [16, 8])


def test_an_argument_of_another_type_cannot_be_recorded() -> None:
    with pytest.raises(Unrecordable, match="argument `x` is a object"):
        encode(object(), "argument `x`")
    with pytest.raises(Unrecordable, match="is a dict"):
        encode({"a": 1}, "argument 2")


def test_a_grid_function_is_recorded_as_its_value_for_each_config() -> None:
    kernel = SimpleNamespace(
        arg_names=["x", "n"], configs=[kernelpick.Config({"BLOCK": b}) for b in (16, 64)]
    )
    data = grid_data(kernel, (None, 100), {}, lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),))
    grid = grid_of(json.loads(json.dumps(data)))
    assert callable(grid)
    assert grid({"n": 100, "BLOCK": 16}) == (7,) and grid({"n": 100, "BLOCK": 64}) == (2,)
    with pytest.raises(ConfigError, match="has no grid for the meta-parameters"):
        grid({"n": 100, "BLOCK": 32})
    assert grid_of(grid_data(kernel, (), {}, (3, 2))) == (3, 2)
