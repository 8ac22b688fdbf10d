"""Tests of processed choices: inputs transformed before the call, outputs after, weights pre-packed once."""

from __future__ import annotations

import collections
import gc
import logging
import time
from typing import Any

import pytest
import torch
import triton
from tests.select import processing_choices
from tests.select.processing_choices import swap_operands, times_transposed, transpose, transposed
from tests.tune.kernels import add_kernel
from torch._subclasses.fake_tensor import FakeTensor

import kernelpick
from kernelpick import Config, Selector, extern, processed, settings, triton_choice
from kernelpick.bench.inputs import Example, new_values
from kernelpick.engine.choice import compile_choices
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError
from kernelpick.select.processing import PrepackCache
from kernelpick.tensors import TensorSpec


def results_of(selector: Selector) -> dict[str, Any]:
    assert selector.last_selection is not None
    return {row.name: row.result for row in selector.last_selection.candidates}


def test_before_and_after_give_the_wrapped_choice_its_layout_and_the_caller_theirs() -> None:
    selector = Selector(
        "mm",
        [
            extern(torch.mm),
            processed(extern(times_transposed), before=lambda a, b: (a, b.t()), name="b transposed"),
            processed(extern(torch.mm), before=swap_operands, after=transposed, name="swapped"),
        ],
        reference="torch.mm",
    )
    a, b = torch.randn(48, 32), torch.randn(32, 40)
    torch.testing.assert_close(selector(a, b), a @ b)
    results = results_of(selector)
    assert results["b transposed"].ok and results["swapped"].ok  # verified against torch.mm
    for name in ("b transposed", "swapped"):
        call = next(c for c in selector.choices_for(a, b) if c.name == name).callable_for(
            Signature.of((a, b), {})
        )
        torch.testing.assert_close(call(a, b), a @ b)


def test_with_after_and_out_the_processed_output_is_written_into_out() -> None:
    selector = Selector(
        "mm_out",
        [
            extern(torch.mm, out=torch.mm),
            processed(extern(torch.mm), before=swap_operands, after=transposed, name="swapped"),
        ],
    )
    a, b = torch.randn(16, 8), torch.randn(8, 12)
    out = torch.empty(16, 12)
    assert selector(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b)
    assert results_of(selector)["swapped"].ok
    swapped = next(c for c in selector.choices_for(a, b, out=out) if c.name == "swapped")
    out.zero_()
    result = swapped.callable_for(Signature.of((a, b), {"out": out}))(a, b, out=out)
    assert result is out
    torch.testing.assert_close(out, a @ b)


def test_the_wrapped_choice_is_expanded_for_the_processed_inputs() -> None:
    space = processed(extern(times_transposed), prepack={1: transpose})
    a, b = torch.randn(6, 4), torch.randn(4, 5)
    inner = space.inner_signature(Signature.of((a, b), {}))
    assert inner.inputs == (TensorSpec.of(a), TensorSpec.of(torch.empty(5, 4)))
    without_out = processed(extern(torch.mm), after=transposed).inner_signature(
        Signature.of((a, b), {"out": torch.empty(6, 5)})
    )
    assert without_out.kwargs == ()  # the wrapped choice makes a new output for `after`


def strided_sum(x: torch.Tensor, y: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
    """Binds flat operands: right only for contiguous inputs."""
    out = torch.empty(x.shape, dtype=x.dtype)
    return (x, y, out, x.numel()), out


def contiguous_both(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.contiguous(), y.contiguous()


def test_a_triton_choice_compiles_and_runs_on_its_processed_inputs() -> None:
    kernel = triton_choice(
        add_kernel,
        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        configs=[Config({"BLOCK": 64})],
        bind=strided_sum,
        name="add",
    )
    selector = Selector(
        "add", [extern(torch.add), kernel, processed(kernel, before=contiguous_both, name="dense")]
    )
    base = torch.randn(20, 16)
    x, y = base[:, ::2], base[:, 1::2]  # strided views: the bare kernel reads the wrong values
    torch.testing.assert_close(selector(x, y), x + y)
    results = results_of(selector)
    assert results["add BLOCK=64, num_warps=4, num_stages=3"].status == "wrong_result"
    assert results["dense BLOCK=64, num_warps=4, num_stages=3"].ok


def sleep_then(seconds: float, value: Any) -> Any:
    time.sleep(seconds)
    return value


def test_processing_is_timed_with_the_choice_and_a_prepack_is_not() -> None:
    packed: list[torch.Tensor] = []

    def slow_pack(y: torch.Tensor) -> torch.Tensor:
        if not isinstance(y, FakeTensor):  # the signature of the packed input is found on fake tensors
            packed.append(y)
        return sleep_then(0.04, y.clone())

    def slowly_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return sleep_then(0.01, x + y)

    selector = Selector(
        "add",
        [
            extern(slowly_add),
            processed(extern(torch.add), before=lambda x, y: sleep_then(0.04, (x, y)), name="slow before"),
            processed(extern(torch.add), prepack={1: slow_pack}, name="slow prepack"),
        ],
        reference=lambda x, y: x + y,  # a function, not a choice: the fastest wins outright
    )
    x, y = torch.randn(64), torch.randn(64)
    with settings.override(rep_ms=50.0):
        torch.testing.assert_close(selector(x, y), x + y)
    results = results_of(selector)
    assert results["slow before"].cost_ms > 40 > results["slowly_add"].cost_ms > 10
    assert results["slow prepack"].cost_ms < 10  # packed once before timing, then reused
    assert selector.last_selection is not None and selector.last_selection.best == "slow prepack"
    assert len(packed) == 2  # the example weight, before timing; the caller's, on the call
    assert packed[-1] is y


def test_a_prepacked_weight_is_packed_once_per_identity_and_version() -> None:
    packs: list[torch.Tensor] = []

    def pack(weight: torch.Tensor) -> torch.Tensor:
        if not isinstance(weight, FakeTensor):
            packs.append(weight)
        return weight.t().contiguous()

    space = processed(extern(times_transposed), prepack={1: pack})
    selector = Selector("mm", [space], cache=False)
    a, w = torch.randn(8, 4), torch.randn(4, 6)
    call = selector.implementation(a, w)
    packs.clear()
    for _ in range(3):
        torch.testing.assert_close(call(a, w), a @ w)
    assert packs == [w]  # once, for three calls
    w.mul_(2)  # in place: a new version
    torch.testing.assert_close(call(a, w), a @ w)
    assert len(packs) == 2
    twin = w.clone()  # equal values, another tensor
    torch.testing.assert_close(call(a, twin), a @ twin)
    assert len(packs) == 3 and packs[-1] is twin
    # A write PyTorch cannot see (a Triton kernel's) needs the version bumped by hand.
    torch.autograd.graph.increment_version(w)
    call(a, w)
    assert len(packs) == 4


def test_a_prepack_entry_goes_with_its_tensor() -> None:
    cache = PrepackCache(lambda t: t * 2)
    weight = torch.ones(3)
    torch.testing.assert_close(cache.get(weight), torch.full((3,), 2.0))
    assert len(cache._entries) == 1
    del weight
    gc.collect()
    assert len(cache._entries) == 0
    with torch.inference_mode():  # inference tensors keep no version: identity and storage still key
        frozen = torch.ones(2)
    assert cache.get(frozen) is cache.get(frozen)


def test_verification_catches_a_wrong_processing() -> None:
    selector = Selector(
        "mm",
        [
            extern(torch.mm),
            processed(extern(torch.mm), before=lambda a, b: (a, b.t()), name="forgot to untranspose"),
            processed(extern(torch.mm), after=lambda out: out * 1.01, name="scaled"),
        ],
    )
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    torch.testing.assert_close(selector(a, b), a @ b)
    results = results_of(selector)
    assert results["forgot to untranspose"].status == "wrong_result"
    assert results["scaled"].status == "wrong_result"
    assert "differs from the reference" in results["scaled"].message


def test_a_processing_that_cannot_run_for_the_inputs_is_recorded_not_chosen() -> None:
    def needs_square(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if a.shape[0] != a.shape[1]:
            raise ValueError("a must be square")
        return a, b

    selector = Selector(
        "mm", [extern(torch.mm), processed(extern(torch.mm), before=needs_square, name="square")]
    )
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    torch.testing.assert_close(selector(a, b), a @ b)
    square = results_of(selector)["square"]
    assert square.status == "runtime_error" and "a must be square" in square.message


def test_processing_that_fake_tensors_cannot_run_is_described_on_example_inputs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def data_dependent(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert a.tolist() is not None  # reads values: fake tensors have none
        return a, b.t().contiguous()

    space = processed(extern(times_transposed), before=data_dependent)
    a, b = torch.randn(3, 2), torch.randn(2, 5)
    with caplog.at_level(logging.DEBUG, logger="kernelpick.select"):
        inner = space.inner_signature(Signature.of((a, b), {}))
    assert inner.inputs[1] == TensorSpec.of(torch.empty(5, 2))
    assert "running it on example inputs" in caplog.text


def test_the_digest_follows_the_processing() -> None:
    def digest(space: Any) -> str:
        signature = Signature.of((torch.randn(4, 4), torch.randn(4, 4)), {})
        return str(space.choices_for(signature)[0].digest)

    def scaled_by(factor: float) -> Any:
        return lambda out: out * factor

    base = digest(processed(extern(torch.mm), after=transposed))
    assert digest(processed(extern(torch.mm), after=transposed)) == base  # rebuilt alike: equal
    assert digest(extern(torch.mm)) != base
    assert digest(processed(extern(torch.mm), after=transpose)) != base
    assert digest(processed(extern(torch.mm), before=lambda a, b: (a, b))) != digest(
        processed(extern(torch.mm), before=lambda a, b: (b, a))  # two lambdas of one function
    )
    assert digest(processed(extern(torch.mm), after=scaled_by(2.0))) != digest(
        processed(extern(torch.mm), after=scaled_by(3.0))  # one function, two closed-over values
    )
    assert digest(processed(extern(torch.mm), prepack={0: transpose})) != digest(
        processed(extern(torch.mm), prepack={1: transpose})
    )
    assert digest(processed(extern(torch.bmm), after=transposed)) != base
    made = [lambda out, factor=factor: out * factor for factor in (2.0, 3.0)]  # a loop's defaults
    assert digest(processed(extern(torch.mm), after=made[0])) != digest(
        processed(extern(torch.mm), after=made[1])
    )

    def scaled(out: Any, *, factor: float) -> Any:
        return out * factor

    scaled.__kwdefaults__ = {"factor": 2.0}
    doubled = digest(processed(extern(torch.mm), after=scaled))
    scaled.__kwdefaults__ = {"factor": 3.0}
    assert digest(processed(extern(torch.mm), after=scaled)) != doubled
    assert digest(processed(extern(torch.mm), after=scaled_by({"factor": 2.0}["factor"]))) != digest(
        processed(extern(torch.mm), after=(lambda table: lambda out: out * table["f"])({"f": 3.0}))
    )


def test_a_before_may_return_a_named_tuple() -> None:
    pair = collections.namedtuple("pair", "first second")
    selector = Selector(
        "mm",
        [
            extern(torch.mm),
            processed(
                extern(torch.mm), before=lambda a, b: pair(b.t(), a.t()), after=transposed, name="pair"
            ),
        ],
        reference="torch.mm",
    )
    a, b = torch.randn(48, 32), torch.randn(32, 40)
    torch.testing.assert_close(selector(a, b), a @ b)
    assert results_of(selector)["pair"].ok


def test_stored_results_are_reused_for_the_same_processing_only() -> None:
    def choices(after: Any) -> list[Any]:
        return [
            extern(torch.mm),
            processed(extern(torch.mm), before=swap_operands, after=after, name="swapped"),
        ]

    a, b = torch.randn(8, 8), torch.randn(8, 8)
    Selector("stored_mm", choices(transposed)).tune(a, b)
    again = Selector("stored_mm", choices(transposed)).tune(a, b)
    assert again.from_store and again["swapped"].result.ok
    changed = Selector("stored_mm", choices(lambda out: out.t().contiguous())).tune(a, b)
    assert (
        not changed.from_store and changed["swapped"].result.ok and not changed["swapped"].result.from_store
    )
    assert changed["torch.mm"].result.from_store


@pytest.mark.slow
def test_processed_choices_are_measured_in_workers(caplog: pytest.LogCaptureFixture) -> None:
    a, b = torch.randn(24, 16), torch.randn(16, 8)
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        torch.testing.assert_close(processing_choices.PROCESSED_MM(a, b), a @ b)
    assert "not in workers" not in caplog.text  # measured in a worker process
    results = results_of(processing_choices.PROCESSED_MM)
    assert results["prepacked"].ok and results["swapped"].ok


def test_bad_processing_is_refused_with_what_was_expected() -> None:
    with pytest.raises(ConfigError, match="wraps a choice"):
        processed(torch.mm, before=swap_operands)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"processed\(before=...\) expects a function, got int"):
        processed(extern(torch.mm), before=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no processing"):
        processed(extern(torch.mm))
    with pytest.raises(ConfigError, match="has key 'b': keys are positional input indices"):
        processed(extern(torch.mm), prepack={"b": transpose})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="has key True"):
        processed(extern(torch.mm), prepack={True: transpose})
    with pytest.raises(ConfigError, match="packs input 1 with a str"):
        processed(extern(torch.mm), prepack={1: "transpose"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"expects a dict \{input index: pack function\}"):
        processed(extern(torch.mm), prepack=[transpose])  # type: ignore[arg-type]
    a = torch.randn(4, 4)
    too_far = Selector("mm", [processed(extern(torch.mm), prepack={2: transpose})])
    with pytest.raises(ConfigError, match="pre-packs input 2, but the call has 2 inputs"):
        too_far(a, a)
    scalar = Selector("mul", [processed(extern(torch.mul), prepack={1: transpose})])
    with pytest.raises(ConfigError, match="pre-packs input 1, a float: only tensors can be pre-packed"):
        scalar(a, 2.0)
    untupled = Selector("neg", [processed(extern(torch.neg), before=lambda x: x.t())])
    with pytest.raises(
        ConfigError, match=r"must return the wrapped choice's inputs as a tuple, got a .*Tensor"
    ):
        untupled(a)


def test_processed_is_exported_and_named_after_its_steps() -> None:
    assert kernelpick.processed is processed
    space = processed(extern(times_transposed), prepack={1: transpose}, before=lambda a, b: (a, b))
    assert space.name == "times_transposed [prepack 1: transpose; before: <lambda>]"
    description = space.choices_for(Signature.of((torch.randn(2, 2), torch.randn(2, 2)), {}))[0].description()
    assert description["kind"] == "processed" and description["choice"]["kind"] == "extern"
    assert description["prepack"] == {"1": "tests.select.processing_choices.transpose"}


def test_every_combination_of_steps_gives_the_product_and_writes_out() -> None:
    def copied(out: torch.Tensor) -> torch.Tensor:
        return out.clone()

    spaces = {
        "before": processed(extern(times_transposed), before=lambda a, b: (a, b.t())),
        "after": processed(extern(torch.mm), after=copied),
        "before, after": processed(extern(torch.mm), before=swap_operands, after=transposed),
        "prepack": processed(extern(times_transposed), prepack={1: transpose}),
        "prepack, after": processed(extern(times_transposed), prepack={1: transpose}, after=copied),
    }
    a, b = torch.randn(6, 4), torch.randn(4, 5)
    for steps, space in spaces.items():
        choice = space.choices_for(Signature.of((a, b), {}))[0]
        torch.testing.assert_close(choice.callable_for(Signature.of((a, b), {}))(a, b), a @ b, msg=steps)
        out = torch.zeros(6, 5)
        into_out = choice.callable_for(Signature.of((a, b), {"out": out}))
        assert into_out(a, b, out=out) is out, steps
        torch.testing.assert_close(out, a @ b, msg=steps)


def test_the_processing_runs_on_fake_tensors_once_per_signature() -> None:
    fake_runs: list[tuple[int, ...]] = []

    def counted_swap(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(a, FakeTensor):
            fake_runs.append(tuple(a.shape))
        return swap_operands(a, b)

    swapped = processed(extern(torch.mm), before=counted_swap, after=transposed, name="swapped")
    # The reference is the processed choice: a tuning asks for its choices again.
    selector = Selector("mm", [extern(torch.mm), swapped], reference="swapped", cache=False)
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    torch.testing.assert_close(selector(a, b), a @ b)
    selector.choices_for(a, b)
    assert fake_runs == [(8, 4)]
    selector(torch.randn(2, 4), b)
    assert fake_runs == [(8, 4), (2, 4)]  # a new signature is worked out anew


def test_the_example_inputs_are_processed_once_for_all_configs() -> None:
    processed_examples: list[torch.Tensor] = []

    def counted_contiguous(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(x, FakeTensor):
            processed_examples.append(x)
        return contiguous_both(x, y)

    kernel = triton_choice(
        add_kernel,
        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        configs=[Config({"BLOCK": block}) for block in (16, 32, 64)],
        bind=strided_sum,
    )
    base = torch.randn(8, 16)
    x, y = base[:, ::2], base[:, 1::2]
    signature = Signature.of((x, y), {})
    choices = processed(kernel, before=counted_contiguous).choices_for(signature)
    example = Example(*new_values((x, y), {}))
    assert len(choices) == 3
    assert all(outcome.ok for outcome in compile_choices(choices, example, signature))
    assert len(processed_examples) == 1  # each config compiles for the same processed inputs
    assert processed_examples[0] is example.args[0]
