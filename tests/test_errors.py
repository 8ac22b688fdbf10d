"""errors.py: how error messages show the values they name."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelpick.errors import describe_value


def test_a_tensor_is_described_by_dtype_size_and_device_never_by_its_values() -> None:
    text = describe_value(torch.arange(100_000, dtype=torch.float16))
    assert text == "a float16 tensor of size [100000] on cpu"
    assert describe_value(torch.empty(2, 3, device="meta")) == "a float32 tensor of size [2, 3] on meta"


def test_tensor_subclasses_are_named_and_parameters_are_plain_tensors() -> None:
    assert describe_value(torch.nn.Parameter(torch.ones(4))) == "a float32 tensor of size [4] on cpu"
    with FakeTensorMode():
        fake = torch.empty(4, 5)
    assert describe_value(fake) == "a float32 FakeTensor of size [4, 5] on cpu"


def test_lists_and_tuples_of_tensors_describe_their_first_tensors() -> None:
    text = describe_value([torch.ones(3)] * 6)
    assert text.startswith("[a float32 tensor of size [3] on cpu, ") and text.endswith(", ...]")
    assert "tensor(" not in text and text.count("float32") == 4
    assert describe_value((torch.ones(2), 5)) == "(a float32 tensor of size [2] on cpu, 5)"


def test_other_values_show_their_repr_cut_short() -> None:
    assert describe_value("abc") == "'abc'"
    assert describe_value([1, 2]) == "[1, 2]"
    long = describe_value(list(range(10_000)))
    assert len(long) == 200 and long.endswith("...")
