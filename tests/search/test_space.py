"""search/space.py: a declared space gives its configs in a stable order, cut by its constraint and
the device's shared memory and registers before anything compiles; what cannot work is refused."""

from __future__ import annotations

import pytest

from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.errors import ConfigError
from kernelpick.search.space import Dimension, Space, gemm_shared_memory

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132, shared_memory_per_block=232448)
CPU = DeviceInfo("cpu", None, "cpu", None, 0, 0)


def test_configs_are_the_product_in_a_stable_order_with_options_apart_from_meta_parameters() -> None:
    space = Space(BLOCK=[32, 16], num_warps=[4, 2], EVEN=[True, False])
    assert space.configs() == [
        Config({"BLOCK": block, "EVEN": even}, num_warps=warps)
        for block in (16, 32)
        for warps in (2, 4)
        for even in (True, False)
    ]
    assert len(space) == space.size == 8
    assert Space(BLOCK=[32, 16], num_warps=[4, 2], EVEN=[True, False]).configs() == space.configs()


def test_the_constraint_sees_every_dimension_by_name_and_leaves_out_what_it_rejects() -> None:
    space = Space(
        BLOCK_M=[16, 32, 64],
        BLOCK_N=[16, 32, 64],
        num_stages=[2, 3],
        constraint=lambda c: c["BLOCK_M"] * c["BLOCK_N"] <= 32 * 32 and c["num_stages"] == 3,
    )
    configs = space.configs()
    assert {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in configs} == {
        (16, 16),
        (16, 32),
        (16, 64),
        (32, 16),
        (32, 32),
        (64, 16),
    }
    assert {c.num_stages for c in configs} == {3}
    assert len(space) == 6 and space.size == 18


def test_gemm_like_spaces_leave_out_tiles_over_the_gpus_shared_memory_by_the_documented_estimate() -> None:
    space = Space(BLOCK_M=[64, 256], BLOCK_N=[64, 256], BLOCK_K=[64, 128], num_stages=[3, 5])
    needs = {c: gemm_shared_memory({**c.kwargs, "num_stages": c.num_stages}) for c in space.configs()}
    assert needs[Config({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128}, num_stages=5)] == (
        (256 * 128 + 128 * 256) * 5 * 2
    )
    on_h100 = space.configs(H100)
    assert on_h100 == [c for c in space.configs() if needs[c] <= 232448]
    assert 0 < len(on_h100) < len(space)
    # No device or a CPU (the interpreter): nothing is left out.
    assert space.configs() == space.configs(CPU) == list(needs)
    # A GPU whose own figure is unknown (described from a store key): its capability's, as the GEMM
    # ops use (DeviceInfo.shared_memory_limit).
    described = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 0, 132)
    assert described.shared_memory_limit == 232448 and space.configs(described) == on_h100


def test_a_shared_memory_estimate_of_ones_own_replaces_the_default() -> None:
    space = Space(BLOCK=[64, 128, 256], shared_memory=lambda c: c["BLOCK"] * 1024)
    assert [c.kwargs["BLOCK"] for c in space.configs(H100)] == [64, 128]
    assert "shared_memory=<" in repr(space)
    assert Space(BLOCK=[64, 128, 256]).configs(H100) == space.configs()  # not a GEMM: no estimate


def test_maxnreg_over_the_registers_of_a_program_is_left_out_on_a_gpu() -> None:
    space = Space(BLOCK=[64], num_warps=[4, 8], maxnreg=[None, 128, 256])
    on_gpu = {(c.num_warps, c.maxnreg) for c in space.configs(H100)}
    # 8 warps * 32 threads * 256 registers = 65,536 registers: the most a program may have.
    assert on_gpu == {(4, None), (4, 128), (4, 256), (8, None), (8, 128), (8, 256)}
    assert {(c.num_warps, c.maxnreg) for c in Space(num_warps=[16], maxnreg=[128, 255]).configs(H100)} == {
        (16, 128)
    }
    assert len(Space(num_warps=[16], maxnreg=[128, 255]).configs(CPU)) == 2


def test_a_space_whose_every_config_needs_too_much_shared_memory_says_so_with_figures() -> None:
    space = Space(
        BLOCK_M=[256, 512, 1024, 2048, 4096],
        BLOCK_N=[256, 512, 1024, 2048, 4096],
        BLOCK_K=[128, 256, 512, 1024, 2048],
        num_stages=[3, 4, 5],
        GROUP_M=[1, 2, 4, 8],
    )
    assert len(space) == 1500
    with pytest.raises(ConfigError) as raised:
        space.configs(H100)
    message = str(raised.value)
    assert "all 1,500 configs" in message
    assert "more shared memory than the NVIDIA H100 80GB HBM3's 227 KiB" in message
    assert "the least needs 384 KiB" in message
    assert "smaller BLOCK sizes or fewer num_stages" in message


def test_a_space_emptied_for_several_reasons_counts_each() -> None:
    space = Space(
        BLOCK_M=[16, 64, 512],
        BLOCK_N=[16],
        BLOCK_K=[128],
        num_stages=[2],
        num_warps=[16],
        maxnreg=[255],
        constraint=lambda c: c["BLOCK_M"] != 16,
    )
    with pytest.raises(ConfigError) as raised:
        space.configs(H100)
    assert "none of the 3 configs" in str(raised.value)
    assert "is left: 1 fail the constraint; 1 need more shared memory than" in str(raised.value)
    assert "; 1 need more registers than a program may have" in str(raised.value)
    with pytest.raises(ConfigError, match=r"all 2 configs .* fail the constraint: loosen"):
        Space(BLOCK=[1, 2], constraint=lambda c: False).configs()


@pytest.mark.parametrize(
    ("dimensions", "expected"),
    [
        ({}, "needs at least one dimension"),
        ({"BLOCK_M": []}, "BLOCK_M has no values: give at least one"),
        ({"BLOCK_M": 64}, r"BLOCK_M=64 is not a list of values: .* BLOCK_M=\[64\]"),
        ({"BLOCK_M": "64"}, "is not a list of values"),
        ({"BLOCK_M": [64, {"a": 1}]}, "value of an unknown kind, dict"),
        ({"num_warps": [4, 0]}, "num_warps values must be positive integers"),
        ({"num_stages": [None]}, "num_stages values must be positive integers"),
    ],
)
def test_a_space_that_cannot_work_is_refused_saying_why(dimensions: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        Space(**dimensions)  # type: ignore[arg-type]


def test_a_constraint_that_raises_is_named_with_the_dimensions_it_is_given() -> None:
    space = Space(BLOCK=[16], constraint=lambda c: c["BLOCK_Q"] > 0)
    with pytest.raises(ConfigError, match=r"constraint raised KeyError\('BLOCK_Q'\).*dimensions \(BLOCK\)"):
        space.configs()


def test_dimensions_know_their_kind_and_order() -> None:
    space = Space(
        BLOCK=[128, 16, 64, 32], STAGES=[3, 2, 5], RATIO=[0.5, 1.0], MODE=["b", "a"], maxnreg=[None, 64]
    )
    dims = space.dimensions
    assert list(dims) == ["BLOCK", "STAGES", "RATIO", "MODE", "maxnreg"]
    assert dims["BLOCK"].values == (16, 32, 64, 128) and dims["BLOCK"].kind == "power_of_two"
    assert dims["STAGES"].values == (2, 3, 5) and dims["STAGES"].kind == "integer"
    assert dims["RATIO"].kind == "number"
    assert dims["MODE"].values == ("b", "a") and dims["MODE"].kind == "choice" and not dims["MODE"].ordered
    assert dims["maxnreg"].kind == "choice"  # None is no number
    assert dims["BLOCK"].position(64) == 2
    assert Dimension("FLAG", (1, True, 1)).values == (1, True)  # 1 and True are two values
    with pytest.raises(
        ConfigError, match=r"BLOCK=48 is not one of the dimension's values \[16, 32, 64, 128\]"
    ):
        dims["BLOCK"].position(48)


def test_the_repr_shows_the_dimensions_and_the_constraint() -> None:
    def small(c: dict[str, int]) -> bool:
        return c["BLOCK_M"] <= 64

    text = repr(Space(BLOCK_M=[64, 16], BLOCK_N=[32], BLOCK_K=[32], num_stages=[2], constraint=small))
    assert text.startswith("Space(BLOCK_M=[16, 64], BLOCK_N=[32], BLOCK_K=[32], num_stages=[2], constraint=<")
    assert "small>" in text and "shared_memory=<default GEMM estimate>" in text
