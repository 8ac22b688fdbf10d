"""The graph operator of a traced launch: clones preserving strides, launch plans, grids per config."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelpick.pytorch.library import GridByConfig, LaunchPlan, clone_preserving_strides, functional_launch
from kernelpick.pytorch.side_table import side_table
from tests.pytorch.kernels import BLOCK, add_kernel


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(12.0).reshape(3, 4),
        lambda: torch.arange(12.0).reshape(3, 4).t(),
        lambda: torch.arange(24.0).reshape(4, 6)[1:, ::2],
        lambda: torch.arange(3.0).expand(4, 3),
        lambda: torch.empty(0, 3),
    ],
    ids=["contiguous", "transposed", "gaps and offset", "overlapping", "empty"],
)
def test_clones_keep_sizes_strides_and_values(make) -> None:  # type: ignore[no-untyped-def]
    original = make()
    clone = clone_preserving_strides(original)
    assert clone.shape == original.shape and clone.stride() == original.stride()
    assert torch.equal(clone, original) and clone.storage_offset() == 0
    assert (
        clone.untyped_storage().data_ptr() != original.untyped_storage().data_ptr() or original.numel() == 0
    )
    with FakeTensorMode() as mode:
        fake = clone_preserving_strides(mode.from_tensor(original))
    assert fake.stride() == original.stride()


def test_a_plan_rebuilds_the_launch() -> None:
    x, y = torch.ones(2), torch.zeros(2)
    plan = LaunchPlan(
        (("tensor", 1), ("constant", None)), (("n", ("int", 0)),), (("int", 1), ("constant", 1))
    )
    assert plan.launch_arguments([x, y], [7, 3]) == ((y, None), {"n": 7}, (3, 1))


def test_grids_per_config_are_found_by_meta_parameters() -> None:
    plan = LaunchPlan((), (), (), ((((("BLOCK", 4),)), (("int", 0),)), (((("BLOCK", 8),)), (("int", 1),))))
    _, _, grid = plan.launch_arguments([], [5, 3])
    assert isinstance(grid, GridByConfig)
    assert grid({"BLOCK": 8, "n": 1}) == (3,) and grid({"BLOCK": 4}) == (5,)
    with pytest.raises(LookupError, match="no traced grid matches"):
        grid({"BLOCK": 2})


def test_the_operator_clones_what_the_plan_says_is_written_and_launches_on_the_clone() -> None:
    x, y, out = torch.ones(8), torch.full((8,), 2.0), torch.zeros(8)
    plan = LaunchPlan(
        (("tensor", 0), ("tensor", 1), ("tensor", 2), ("int", 0)),
        (("BLOCK", ("constant", BLOCK)),),
        (("constant", 1),),
        written=(2,),
    )
    (result,) = functional_launch(
        side_table.add_kernel(add_kernel), side_table.add_constant(plan), [x, y, out], [8]
    )
    assert torch.equal(result, torch.full((8,), 3.0)) and torch.equal(out, torch.zeros(8))
