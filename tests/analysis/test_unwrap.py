"""Peeling tuning and heuristics wrappers off a kernel, Triton's and look-alikes (kernelpick's tuner)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import triton
from access_corpus import copy, f32
from tests.tune.test_descriptors import matmul_tma, set_block_shapes, tiles
from triton.tools.tensor_descriptor import TensorDescriptor

import kernelpick
from kernelpick.analysis import analyze, clear_cache
from kernelpick.compile.unwrap import innermost, unwrap
from kernelpick.errors import AnalysisError


@dataclass
class LookAlikeConfig:
    """Shaped like a kernelpick / Triton config: meta-parameters plus compile options."""

    kwargs: dict[str, Any]
    num_warps: int | None = 4
    num_stages: int | None = None
    num_ctas: int | None = None
    maxnreg: int | None = None


@dataclass
class LookAlikeTuner:
    fn: Any
    configs: list[LookAlikeConfig] = field(default_factory=list)


def test_duck_typed_tuner_contributes_its_first_config() -> None:
    tuner = LookAlikeTuner(copy, [LookAlikeConfig({"BLOCK": 64}, num_warps=8), LookAlikeConfig({"BLOCK": 7})])
    unwrapped = unwrap(tuner, (f32(), f32(), 8), {})
    assert unwrapped.kernel is copy
    assert unwrapped.kwargs == {"BLOCK": 64, "num_warps": 8}


def test_caller_arguments_win_over_config_values() -> None:
    tuner = LookAlikeTuner(copy, [LookAlikeConfig({"BLOCK": 64})])
    assert unwrap(tuner, (), {"BLOCK": 32}).kwargs["BLOCK"] == 32


def test_triton_autotune_config_options_are_passed() -> None:
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=2, num_stages=2)], key=[])(copy)
    assert unwrap(tuned, (), {}).kwargs == {"BLOCK": 32, "num_warps": 2, "num_stages": 2, "num_ctas": 1}


def test_look_alike_tuner_around_heuristics_end_to_end() -> None:
    clear_cache()
    with_heuristics = triton.heuristics({"BLOCK": lambda args: 16 if args["n"] < 100 else 64})(copy)
    tuner = LookAlikeTuner(with_heuristics, [LookAlikeConfig({}, num_warps=4)])
    access = analyze(tuner, f32(), f32(), 8)
    assert (access.read, access.mutated) == (("x_ptr",), ("y_ptr",))


def test_heuristic_sees_config_values_of_an_outer_tuner() -> None:
    seen: dict[str, Any] = {}

    def block(args: dict[str, Any]) -> int:
        seen.update(args)
        return 16

    tuner = LookAlikeTuner(triton.heuristics({"BLOCK": block})(copy), [LookAlikeConfig({"num_stages": 3})])
    unwrap(tuner, (f32(), f32(), 8), {})
    assert seen["n"] == 8 and seen["num_stages"] == 3


def test_raising_heuristic_is_reported_not_raised() -> None:
    def broken(args: dict[str, Any]) -> int:
        raise ZeroDivisionError("boom")

    unwrapped = unwrap(triton.heuristics({"BLOCK": broken})(copy), (f32(), f32(), 8), {})
    assert unwrapped.problem == "heuristic for `BLOCK` raised ZeroDivisionError: boom"


def test_non_kernels_are_rejected() -> None:
    with pytest.raises(AnalysisError, match=r"expected a @triton\.jit function"):
        unwrap(LookAlikeTuner(print, []), (), {})


def test_a_tensor_given_for_the_kernel_is_described_not_printed() -> None:
    with pytest.raises(AnalysisError) as raised:
        analyze(torch.arange(100_000.0), f32())
    message = str(raised.value)
    assert "got Tensor: a float32 tensor of size [100000] on cpu" in message
    assert "tensor(" not in message


def test_self_wrapping_object_is_rejected() -> None:
    class Loop:
        @property
        def fn(self) -> Any:
            return self

    with pytest.raises(AnalysisError, match="nest more than"):
        innermost(Loop())


@pytest.mark.parametrize("tuner", ["triton", "kernelpick"])
def test_a_tuned_tma_kernel_is_analyzed_with_the_block_shapes_its_first_configs_hook_sets(tuner: str) -> None:
    # Tutorial 09's TMA matmul: placeholder [1, 1] blocks, set by the config's pre_hook. Without the
    # hook the TTIR fails ("accumulator shape is incompatible") and every tensor counts as written.
    def shapes_and_a_write(nargs: dict[str, Any]) -> None:
        set_block_shapes(nargs)
        nargs["a_desc"].base.zero_()  # the analysis hands the hook meta tensors: never the caller's

    decorate = triton.autotune if tuner == "triton" else kernelpick.autotune
    kernel = decorate(tiles(shapes_and_a_write), key=["M", "N", "K"])(matmul_tma)
    a, c = torch.ones(64, 64, dtype=torch.float16), torch.empty(64, 64, dtype=torch.float16)
    descriptors = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (a, a, c)]
    access = analyze(kernel, *descriptors, 64, 64, 64)
    assert access.certain and access.mutated == ("c_desc",) and access.read == ("a_desc", "b_desc")
    assert [d.block_shape for d in descriptors] == [[1, 1]] * 3 and bool(a.eq(1).all())
