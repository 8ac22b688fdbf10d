"""A selection's example inputs (bench/inputs.py): metadata kept, values private, restorable, RNG untouched."""

from __future__ import annotations

import torch

from kernelpick.bench.inputs import Example, new_values
from kernelpick.tensors import TensorSpec, example_tensor


def test_example_tensors_keep_dtype_sizes_strides_and_offset() -> None:
    for real in (
        torch.randn(10, 70)[2:, 3:67],
        torch.randn(5, 4).t(),
        torch.randint(0, 9, (3, 3), dtype=torch.int8),
    ):
        made = example_tensor(TensorSpec.of(real), torch.Generator().manual_seed(0))
        assert TensorSpec.of(made) == TensorSpec.of(real)


def test_values_suit_the_dtype() -> None:
    generator = torch.Generator().manual_seed(0)
    floats = example_tensor(TensorSpec.of(torch.empty(4096, dtype=torch.float16)), generator)
    assert 0.8 < float(floats.float().std()) < 1.2
    small = example_tensor(TensorSpec.of(torch.empty(4096, dtype=torch.int32)), generator)
    assert int(small.min()) >= -8 and int(small.max()) < 8
    unsigned = example_tensor(TensorSpec.of(torch.empty(4096, dtype=torch.uint8)), generator)
    assert int(unsigned.max()) < 16
    flags = example_tensor(TensorSpec.of(torch.empty(4096, dtype=torch.bool)), generator)
    assert 0 < int(flags.sum()) < 4096


def test_examples_do_not_draw_from_the_global_generator_and_are_reproducible() -> None:
    real = torch.empty(16, 16)
    torch.manual_seed(7)
    state = torch.get_rng_state()
    first = new_values((real,), {})[0][0].clone()
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(new_values((real,), {})[0][0], first)


def test_restore_undoes_writes_and_changed_notices_them() -> None:
    example = Example(*new_values((torch.empty(8), 3), {"out": torch.empty(8)}))
    x = example.args[0]
    before = x.clone()
    assert example.args[1] == 3 and example.kwargs["out"].shape == (8,)
    assert not example.changed()
    x.add_(1)
    assert example.changed()
    example.restore()
    assert torch.equal(x, before) and not example.changed()
