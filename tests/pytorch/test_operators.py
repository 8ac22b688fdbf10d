"""`kernelpick.op`: registration with inferred or checked mutations, errors users see, the eager fast path, autograd."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import kernelpick
from kernelpick import settings
from kernelpick.errors import MutatesArgsError, OperatorError
from kernelpick.pytorch import Operator
from tests.pytorch.kernels import (
    BLOCK,
    add,
    add_and_increment_,
    add_kernel,
    blocks,
    impure_asm_kernel,
    increment_,
    increment_kernel,
    increment_row_,
    scale_kernel,
)

_names = itertools.count()


def fresh(prefix: str) -> str:
    """A name no test has registered yet (registrations cannot be undone within a process)."""
    return f"kp_test_operators::{prefix}_{next(_names)}"


def increment_all(x: torch.Tensor) -> None:
    increment_kernel[blocks(x.numel())](x, x.numel(), BLOCK=BLOCK)


def test_eager_results_and_inferred_mutations() -> None:
    x, y = torch.arange(16.0), torch.ones(16)
    assert torch.equal(add(x, y), x + 1) and add.mutates_args == ()
    increment_(x)
    assert torch.equal(x, torch.arange(16.0) + 1) and increment_.mutates_args == ("x",)
    before = x.clone()
    assert torch.equal(add_and_increment_(x, y), before + 1) and torch.equal(x, before + 1)
    assert add_and_increment_.mutates_args == ("x",)
    grid = torch.zeros(4, 4)
    increment_row_(grid, 1)
    assert grid.sum() == 4 and torch.equal(grid[1], torch.ones(4))
    assert increment_row_.mutates_args == ("x",) and increment_row_.inference.writes[0].through_view
    assert (
        str(increment_row_.overload._schema)
        == "kp_test_kernels::increment_row_(Tensor(a0!) x, SymInt row) -> ()"
    )
    assert torch.ops.kp_test_kernels.increment_.default is increment_.overload


def test_a_wrong_explicit_mutates_args_raises_at_registration_naming_argument_and_kernel() -> None:
    name = fresh("wrong")
    with pytest.raises(MutatesArgsError) as raised:
        kernelpick.op(name, mutates_args=(), example_inputs=(torch.zeros(4),))(increment_all)
    message = str(raised.value)
    assert "`x` is written but not declared" in message and "kernel `increment_kernel`" in message
    assert "x_ptr" in message
    assert not hasattr(torch.ops.kp_test_operators, name.split("::")[1]), "nothing was defined"

    def add_into(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        add_kernel[blocks(4)](x, y, out, 4, BLOCK=BLOCK)

    with pytest.raises(MutatesArgsError, match=r"`x` is declared but nothing writes it.*`add_kernel`"):
        kernelpick.op(
            fresh("over"),
            mutates_args=("x", "out"),
            example_inputs=(torch.ones(4), torch.ones(4), torch.ones(4)),
        )(add_into)


def test_without_examples_the_check_happens_at_the_first_call_before_anything_runs() -> None:
    # A declared operator is registered as its module is imported (torch.export.load needs it then);
    # what it declares is checked at its first call, which runs nothing until the check passes.
    wrong = kernelpick.op(fresh("late"), mutates_args=())(increment_all)
    assert wrong.registered
    x = torch.zeros(4)
    for _ in range(2):  # every call, until a right declaration replaces it
        with pytest.raises(MutatesArgsError, match=r"`x` is written but not declared"):
            wrong(x)
    assert torch.equal(x, torch.zeros(4))
    right = kernelpick.op(fresh("late"), mutates_args=("x",))(increment_all)
    right(x)
    assert torch.equal(x, torch.ones(4)) and right.mutates_args == ("x",)


def test_mistakes_in_declarations_are_reported() -> None:
    with pytest.raises(OperatorError, match=r"namespace::name"):
        kernelpick.op("no_namespace")(increment_all)
    with pytest.raises(OperatorError, match=r"got the string 'x'"):
        kernelpick.op(fresh("string"), mutates_args="x")(increment_all)
    with pytest.raises(OperatorError, match=r"schema marks"):
        kernelpick.op(fresh("both"), mutates_args=(), schema="(Tensor(a!) x) -> ()")(increment_all)
    with pytest.raises(MutatesArgsError, match=r"`n`, which is not a tensor parameter"):
        kernelpick.op(fresh("int"), mutates_args=("n",), schema="(Tensor x, int n) -> ()")(
            lambda x, n: increment_all(x)
        )


def test_a_selector_is_pointed_to_as_op() -> None:
    selector = kernelpick.Selector("add", [kernelpick.extern(torch.add)])
    with pytest.raises(
        OperatorError, match=r"selector `add`; a selector becomes an operator with selector\.as_op"
    ):
        kernelpick.op(fresh("selector"), selector)


def test_a_given_schema_gets_the_inferred_mutations() -> None:
    op = kernelpick.op(fresh("schema"), schema="(Tensor x) -> ()")(increment_all)
    op.register(torch.zeros(3))
    assert op.mutates_args == ("x",) and "Tensor(a0!) x" in op.schema


def test_returning_an_input_or_a_view_of_one_is_rejected_with_advice() -> None:
    def increment_and_return(x: torch.Tensor) -> torch.Tensor:
        increment_all(x)
        return x

    with pytest.raises(OperatorError, match=r"shares memory with input `x`.*Return nothing"):
        kernelpick.op(fresh("alias"), example_inputs=(torch.zeros(2),))(increment_and_return)


def test_an_unsure_analysis_marks_every_input_the_kernel_gets(caplog: pytest.LogCaptureFixture) -> None:
    def copy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty_like(x)
        impure_asm_kernel[(1,)](x, y, scratch, BLOCK=BLOCK)
        return scratch

    with caplog.at_level(logging.WARNING, logger="kernelpick.pytorch"):
        op = kernelpick.op(fresh("unsure"), example_inputs=(torch.ones(BLOCK), torch.ones(BLOCK)))(copy)
    assert op.mutates_args == ("x", "y") and not op.inference.certain
    assert "not pure" in op.inference.reason and "unsure" in caplog.text


def test_functions_that_need_data_can_declare_and_give_a_fake() -> None:
    def scale(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        scale_kernel[blocks(x.numel())](x, out, x.numel(), float(x.max().item()), BLOCK=BLOCK)
        return out

    with pytest.raises(OperatorError, match=r"failed when run on fake tensors"):
        kernelpick.op(fresh("data"), example_inputs=(torch.ones(2),))(scale)
    op = kernelpick.op(fresh("data"), mutates_args=())(scale)
    op.register_fake(lambda x: torch.empty_like(x))
    x = torch.tensor([1.0, 3.0])
    assert torch.equal(op(x), x * 3) and not op.inference.certain
    with torch._subclasses.fake_tensor.FakeTensorMode():
        assert op(torch.empty(5)).shape == (5,)


def test_a_trace_that_writes_an_undeclared_input_is_an_error() -> None:
    def increment_one_(x: torch.Tensor, y: torch.Tensor, which: int) -> None:
        increment_all(x if which == 0 else y)

    op = kernelpick.op(fresh("depends"))(increment_one_)
    op(torch.zeros(2), torch.zeros(2), 0)
    assert op.mutates_args == ("x",)
    with pytest.raises(MutatesArgsError, match=r"registered as mutating \('x',\).*writes `y`"):
        with torch._subclasses.fake_tensor.FakeTensorMode():
            op(torch.empty(2), torch.empty(2), 1)


class CountingMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls.append(str(func))
        return func(*args, **(kwargs or {}))


def test_eager_calls_skip_the_dispatcher_only_when_nothing_watches(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = torch.ones(4), torch.ones(4)
    add(x, y)  # registered
    monkeypatch.setattr(add, "_overload", lambda *a, **k: pytest.fail("went through the dispatcher"))
    assert torch.equal(add(x, y), x + y)
    monkeypatch.undo()
    with CountingMode() as mode:
        add(x, y)
    assert "kp_test_kernels.add.default" in mode.calls, "a dispatch mode sees the operator"


def test_the_fast_path_can_be_turned_off() -> None:
    with settings.override(op_fast_path=False):
        op = kernelpick.op(fresh("slow"), example_inputs=(torch.zeros(2),))(increment_all)
    calls = []
    original = op._overload
    op._overload = lambda *a, **k: calls.append(1) or original(*a, **k)
    op(torch.zeros(2))
    assert calls == [1]


def test_the_fast_path_bumps_version_counters_so_autograd_sees_the_write() -> None:
    x = torch.zeros(4)
    version = x._version
    increment_(x)
    assert x._version > version
    weight = torch.ones(4, requires_grad=True)
    product = weight * x  # saves x for the backward pass
    increment_(x)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        product.sum().backward()


def test_register_autograd_gives_gradients() -> None:
    def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
        out = torch.empty_like(x)
        scale_kernel[blocks(x.numel())](x, out, x.numel(), factor, BLOCK=BLOCK)
        return out

    op: Operator = kernelpick.op(fresh("scale"))(scale)
    op.register_autograd(lambda ctx, grad: (grad * ctx.factor, None), setup_context=_keep_factor)
    x = torch.arange(4.0, requires_grad=True)
    op(x, 3.0).sum().backward()
    assert torch.equal(x.grad, torch.full((4,), 3.0))
    compiled = torch.compile(lambda t: op(t, 2.0).sum(), backend="aot_eager", fullgraph=True)
    x.grad = None
    compiled(x).backward()
    assert torch.equal(x.grad, torch.full((4,), 2.0))


def _keep_factor(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.factor = inputs[1]


def test_facts_before_registration_say_how_to_register() -> None:
    op = kernelpick.op(fresh("later"))(increment_all)
    assert not op.registered and "not registered yet" in repr(op)
    with pytest.raises(OperatorError, match=r"call it once, call `.register"):
        op.mutates_args  # noqa: B018
    with pytest.raises(OperatorError, match=r"example_inputs"):
        op.overload  # noqa: B018
    assert op.register(torch.zeros(1)) is op and op.mutates_args == ("x",)
    assert op.__name__ == "increment_all" and "mutates_args=('x',)" in repr(op)


def test_tensor_lists_keyword_only_arguments_and_several_outputs() -> None:
    def split_increment(
        xs: list[torch.Tensor], extra: torch.Tensor, *, times: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]:
        for _ in range(times):
            increment_all(xs[1])
            increment_all(extra)
        return xs[0] * 2, torch.empty_like(extra)

    with pytest.raises(OperatorError, match=r"cannot be keyword-only.*`extra`"):
        kernelpick.op(fresh("keyword"), schema="(Tensor x, *, Tensor extra) -> ()")(lambda x, *, extra: None)
    op = kernelpick.op(fresh("lists"))(split_increment)
    a, b, extra = torch.zeros(3), torch.zeros(3), torch.zeros(2)
    versions = (a._version, b._version)
    doubled, _ = op([a, b], extra=extra, times=1)
    assert op.mutates_args == ("xs", "extra") and "Tensor(a0!)[] xs" in op.schema
    assert torch.equal(b, torch.ones(3)) and torch.equal(extra, torch.ones(2)) and torch.equal(doubled, a * 2)
    assert a._version > versions[0] and b._version > versions[1], "every tensor of a written list is bumped"
    compiled = torch.compile(lambda p, q, e: op([p, q], e, times=1)[0], backend="aot_eager", fullgraph=True)
    compiled(a, b, extra)
    assert torch.equal(b, torch.full((3,), 2.0)) and torch.equal(extra, torch.full((2,), 2.0))
