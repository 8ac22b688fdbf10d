"""Tests of triton_choice: a hand-written kernel's configs as choices, run in Triton's interpreter."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
import triton

from kernelpick import Config, Selector, extern, triton_choice
from kernelpick.errors import ConfigError
from tests.tune.kernels import add_kernel


def bind(x: torch.Tensor, y: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
    out = torch.empty_like(x)
    return (x, y, out, x.numel()), out


def grid(meta: dict[str, Any]) -> tuple[int]:
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


def test_every_config_is_a_choice_and_a_bad_one_is_recorded_not_chosen() -> None:
    configs = [Config({"BLOCK": 64}), Config({"BLOCK": 128}), Config({"BLOCK": 48})]  # 48: not a power of 2
    selector = Selector(
        "add", [extern(torch.add), triton_choice(add_kernel, grid=grid, configs=configs, bind=bind)]
    )
    x, y = torch.randn(200), torch.randn(200)
    assert torch.equal(selector(x, y), x + y)
    record = selector.last_selection
    assert record is not None
    assert record["add_kernel BLOCK=64, num_warps=4, num_stages=3"].result.ok
    assert record["add_kernel BLOCK=128, num_warps=4, num_stages=3"].result.ok
    bad = record["add_kernel BLOCK=48, num_warps=4, num_stages=3"].result
    assert bad.status == "compile_error" and "power of 2" in bad.message
    description = record["add_kernel BLOCK=64, num_warps=4, num_stages=3"].description
    assert description == {
        "kind": "triton",
        "name": "add_kernel BLOCK=64, num_warps=4, num_stages=3",
        "kernel": "add_kernel",
        "config": Config({"BLOCK": 64}).to_dict(),
        "source": add_kernel.cache_key,  # where `kernelpick code` finds its kept source
    }


def test_a_triton_choice_alone_runs_in_the_interpreter_through_its_bind() -> None:
    selector = Selector(
        "add", [triton_choice(add_kernel, grid=grid, configs=[Config({"BLOCK": 32})], bind=bind, name="add")]
    )
    x, y = torch.randn(70), torch.randn(70)
    assert torch.equal(selector(x, y), x + y)
    assert selector.last_selection is not None and selector.last_selection.reference is None  # no extern


def test_bind_may_pass_arguments_by_name() -> None:
    def by_name(x: torch.Tensor, y: torch.Tensor) -> tuple[dict[str, Any], torch.Tensor]:
        out = torch.empty_like(x)
        return {"x_ptr": x, "y_ptr": y, "out_ptr": out, "n": x.numel()}, out

    choice = triton_choice(add_kernel, grid=grid, configs=[Config({"BLOCK": 32})], bind=by_name)
    selector = Selector("add", [extern(torch.add), choice], reference="torch.add")
    x, y = torch.randn(40), torch.randn(40)
    selector.tune(x, y)
    assert selector.last_selection is not None
    assert all(r.result.ok for r in selector.last_selection.candidates)


def test_the_digest_changes_with_the_config_and_the_kernel_source() -> None:
    from kernelpick.engine.signature import Signature

    signature = Signature.of((torch.empty(4), torch.empty(4)), {})
    space = triton_choice(
        add_kernel, grid=grid, configs=[Config({"BLOCK": 32}), Config({"BLOCK": 64})], bind=bind
    )
    first, second = space.choices_for(signature)
    assert first.digest != second.digest
    assert first.digest == space.choices_for(signature)[0].digest


def test_the_digest_changes_with_what_bind_and_grid_are_not_only_their_names() -> None:
    from kernelpick.engine.signature import Signature

    signature = Signature.of((torch.empty(4), torch.empty(4)), {})

    def digest(bind: Any, grid: Any) -> str:
        space = triton_choice(add_kernel, grid=grid, configs=[Config({"BLOCK": 32})], bind=bind)
        return str(space.choices_for(signature)[0].digest)

    def binds(n: int) -> Any:
        def bind(x: torch.Tensor, y: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
            out = torch.empty_like(x)
            return (x, y, out, n), out

        return bind

    assert digest(binds(4), grid) == digest(binds(4), grid)
    assert digest(binds(4), grid) != digest(binds(2), grid)  # one bind's name, another launch
    assert digest(binds(4), grid) != digest(binds(4), (1,))
    assert digest(binds(4), (1,)) != digest(binds(4), (2,))


def test_a_pick_that_loses_the_gradient_is_warned_of_once(caplog: pytest.LogCaptureFixture) -> None:
    """A Triton pick's output has no grad_fn where an extern's would: training through it would drop
    the gradient without a word."""
    space = triton_choice(add_kernel, grid=grid, configs=[Config({"BLOCK": 64})], bind=bind)
    selector = Selector("add_of_weights", [space], reference=lambda x, y: x + y)
    x, w = torch.randn(100), torch.randn(100, requires_grad=True)
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        y = selector(x, w)
        selector(x, w)
        selector(x[:50], torch.randn(50, requires_grad=True))
        with torch.no_grad():
            selector(x[:30], w[:30])
        Selector("add_by_torch", [extern(torch.add)])(x, w)  # an extern's output carries it: nothing said
    said = [r.getMessage() for r in caplog.records if "gradients through it are lost" in r.getMessage()]
    assert y.grad_fn is None
    assert len(said) == 1 and "selector `add_of_weights`" in said[0] and "add_kernel BLOCK=64" in said[0]


def test_triton_choice_needs_a_triton_kernel() -> None:
    with pytest.raises(ConfigError, match=r"expects a @triton\.jit kernel"):
        triton_choice(torch.add, grid=(1,), configs=[], bind=bind)


def test_the_engine_asks_a_choice_where_it_compiles_and_which_space_it_searches_it_in() -> None:
    from kernelpick import processed
    from kernelpick.engine.choice import compiles_without_user_code, searched_as
    from kernelpick.engine.signature import Signature

    signature = Signature.of((torch.empty(4), torch.empty(4)), {})
    configs = [Config({"BLOCK": 32}), Config({"BLOCK": 64})]
    space = triton_choice(add_kernel, grid=grid, configs=configs, bind=bind)
    first, second = space.choices_for(signature)
    assert searched_as(first) == (configs[0], id(space), space.name)  # one space, two configs
    assert searched_as(second) == (configs[1], id(space), space.name)
    assert not compiles_without_user_code(first)  # its bind is the user's: it compiles in a worker
    library = extern(torch.add).choices_for(signature)[0]
    assert searched_as(library) is None and compiles_without_user_code(library)
    wrapped = processed(space, before=lambda x, y: (y, x), name="swapped")
    inner = wrapped.choices_for(signature)[0]
    assert searched_as(inner) == (configs[0], id(wrapped), wrapped.name)  # searched in the processed space
    assert not compiles_without_user_code(inner)  # `before` is the user's

    class Plain:  # a choice of the user's own, with none of the optional members
        name = digest = "plain"

    assert searched_as(Plain()) is None and not compiles_without_user_code(Plain())  # type: ignore[arg-type]

    class Named:  # a choice of the user's own whose `config` and `space` are its own things
        name = digest = "named"
        config = ("BLOCK", 64)
        space = "tiles"

    assert searched_as(Named()) is None  # type: ignore[arg-type]  # measured, not searched
