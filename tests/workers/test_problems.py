"""Tests of arguments as plain data (workers/problems.py): a worker re-creates the caller's layouts."""

from __future__ import annotations

from pathlib import Path

import torch

from kernelpick.tensors import TensorSpec, example_generator, is_aligned
from kernelpick.workers.problems import describe_value, rebuild_value


def crossed(values: dict[str, object], folder: Path) -> dict[str, object]:
    """`values` described as a worker request carries them and re-created as the worker does (CPU)."""
    cpu = torch.device("cpu")
    generator = example_generator(cpu)
    return {
        name: rebuild_value(describe_value(value, folder), cpu, generator) for name, value in values.items()
    }


def misaligned_storage(values: torch.Tensor) -> torch.Tensor:
    """`values` in a storage that starts one element (4 bytes for int32) past a 16-byte boundary."""
    padded = torch.cat([values[:1], values])
    storage = padded.untyped_storage()[values.element_size() :]
    return torch.empty(0, dtype=values.dtype).set_(storage, 0, values.shape, (1,))


def test_integer_tensors_keep_their_values_layout_and_misalignment(tmp_path: Path) -> None:
    indices = torch.arange(8, dtype=torch.int32)
    cases = {
        "misaligned storage": misaligned_storage(indices),
        "misaligned offset": torch.arange(9, dtype=torch.int32)[1:],
        "aligned": indices,
        "misaligned bools": misaligned_storage(torch.tensor([True, False] * 4)),
    }
    assert not is_aligned(cases["misaligned storage"]) and cases["misaligned storage"].storage_offset() == 0
    rebuilt = crossed(cases, tmp_path)
    for name, real in cases.items():
        assert TensorSpec.of(rebuilt[name]) == TensorSpec.of(real), name
        assert is_aligned(rebuilt[name]) == is_aligned(real), name
        assert torch.equal(rebuilt[name], real), name  # integer values travel as they are


def test_integer_values_stay_behind_where_the_worker_makes_new_ones() -> None:
    # A selection's example inputs are new values, integer ones too (unless its input_gen is given
    # the real ones): nothing of theirs is written for the worker.
    indices = torch.arange(8, dtype=torch.int32)
    described = describe_value(indices, None)
    assert "values" not in described
    rebuilt = rebuild_value(described, torch.device("cpu"), example_generator(torch.device("cpu")))
    assert TensorSpec.of(rebuilt) == TensorSpec.of(indices)


def test_misaligned_floats_are_rebuilt_misaligned_with_example_values(tmp_path: Path) -> None:
    real = misaligned_storage(torch.zeros(8))
    rebuilt = crossed({"x": real}, tmp_path)["x"]
    assert TensorSpec.of(rebuilt) == TensorSpec.of(real) and not is_aligned(rebuilt)
    assert bool(rebuilt.ne(0).any())  # random values, not the caller's


def test_a_tensor_descriptor_is_rebuilt_over_a_tensor_of_its_own(tmp_path: Path) -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    real = TensorDescriptor.from_tensor(torch.zeros(64, 32, dtype=torch.float16)[:, :16], [16, 8])
    rebuilt = crossed({"desc": real}, tmp_path)["desc"]
    assert isinstance(rebuilt, TensorDescriptor)
    assert (list(rebuilt.shape), list(rebuilt.strides), rebuilt.block_shape) == ([64, 16], [32, 1], [16, 8])
    assert TensorSpec.of(rebuilt.base) == TensorSpec.of(real.base)
    assert bool(rebuilt.base.ne(0).any())  # example values, as for any float tensor


def test_a_descriptor_of_an_unknown_class_stays_in_the_callers_process(tmp_path: Path) -> None:
    import dataclasses

    import pytest

    from kernelpick.errors import IsolationError

    @dataclasses.dataclass
    class Homemade:
        base: torch.Tensor
        block_shape: list[int]

    with pytest.raises(IsolationError, match=r"only triton\.tools\.tensor_descriptor\.TensorDescriptor"):
        describe_value(Homemade(torch.zeros(4), [4]), tmp_path)
