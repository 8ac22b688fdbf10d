"""On a GPU: run every corpus kernel on real buffers and check that each buffer it changed is reported written."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import triton
from access_corpus import CASES, Case
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.analysis import analyze

pytestmark = pytest.mark.gpu

#: Kernels that cannot be run safely as written for the analysis tests.
NOT_RUN = {"integer_address_argument": "it writes to an arbitrary integer address"}


def _real(value: Any, generator: torch.Generator) -> Any:
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point:
            return torch.randn(value.shape, dtype=value.dtype, device="cuda", generator=generator)
        # Small non-negative integers: valid indices into every corpus tensor.
        return torch.randint(0, 8, value.shape, dtype=value.dtype, device="cuda", generator=generator)
    if isinstance(value, TensorDescriptor):
        return TensorDescriptor.from_tensor(_real(value.base, generator), list(value.block_shape))
    if isinstance(value, tuple):
        return tuple(_real(v, generator) for v in value)
    return value


def _buffers(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, TensorDescriptor):
        return [value.base]
    if isinstance(value, tuple):
        return [t for v in value for t in _buffers(v)]
    return []


def _prepare(case: Case, args: tuple[Any, ...]) -> None:
    """Make the arguments some kernels need to run at all: a free lock, a table of real addresses."""
    if case.name == "atomic_cas":
        args[0].zero_()
    if case.name.startswith("pointer_table"):
        args[0].fill_(args[1].data_ptr())


@pytest.fixture(scope="module", autouse=True)
def scratch_allocator() -> None:
    """Device-side tensor descriptors need global scratch memory at run time (not for TTIR)."""
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_observed_write_is_reported(case: Case) -> None:
    if not case.available:
        pytest.skip(case.unavailable_because)
    if case.name in NOT_RUN:
        pytest.skip(NOT_RUN[case.name])
    meta_args, kwargs = case.arguments()
    generator = torch.Generator(device="cuda").manual_seed(0)
    args = tuple(_real(a, generator) for a in meta_args)
    _prepare(case, args)
    access = analyze(case.kernel, *args, **kwargs)
    names = list(case.kernel.arg_names)
    before = {names[i]: [b.clone() for b in _buffers(a)] for i, a in enumerate(args)}
    try:
        case.kernel[(1,)](*args, **kwargs)
        torch.cuda.synchronize()
    except Exception as error:  # a construct this GPU lacks (descriptor gather/scatter needs Blackwell)
        pytest.skip(f"Triton cannot run `{case.name}` on this GPU: {type(error).__name__}")
    changed = {
        names[i]
        for i, a in enumerate(args)
        if any(
            not torch.equal(old.view(torch.uint8), new.view(torch.uint8))
            for old, new in zip(before[names[i]], _buffers(a), strict=True)
        )
    }
    assert changed <= set(access.mutated), (
        f"{case.name}: changed {sorted(changed)}, reported {access.mutated}"
    )
    if case.certain:
        assert changed, f"{case.name}: the run changed nothing, so it checks nothing"
