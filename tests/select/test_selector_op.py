"""`Selector.as_op`: a selector as a PyTorch operator that compiled and exported programs call, selecting
when they run; eager calls stay the selector's own."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelpick import Config, Selector, extern, settings, triton_choice
from kernelpick.errors import OperatorError

_names = itertools.count()


def fresh(prefix: str) -> str:
    """A name no test has registered yet (registrations cannot be undone within a process)."""
    return f"kp_test_selector_op::{prefix}_{next(_names)}"


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def bind(x: torch.Tensor, y: torch.Tensor) -> tuple[tuple[object, ...], torch.Tensor]:
    out = torch.empty_like(x)
    return (x, y, out, x.numel()), out


def triton_add() -> Selector:
    return Selector(
        "add",
        [
            extern(torch.add),
            triton_choice(
                add_kernel,
                grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
                configs=[Config({"BLOCK": 64}), Config({"BLOCK": 256})],
                bind=bind,
            ),
        ],
    )


def slow_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = x + y
    for _ in range(20):  # the same result, twenty times the work
        out = x + y
    return out


def fast_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.add(x, y)


class Wrapper(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fn(x, y)


# One operator for the compile and export tests: each backend compiles the same function.
_add = triton_add()
_add_op = _add.as_op(fresh("add"), schema="(Tensor x, Tensor y) -> Tensor")


def around_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _add_op(x * 2, y) + 1


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_a_selector_as_op_compiles_in_one_graph_and_matches_eager(backend: str) -> None:
    x, y = torch.randn(300), torch.randn(300)
    expected = around_add(x, y)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    torch.testing.assert_close(torch.compile(around_add, backend=counter, fullgraph=True)(x, y), expected)
    assert counter.frame_count == 1, "one graph: no graph break"


def test_an_exported_program_selects_when_it_runs_not_when_exported() -> None:
    x, y = torch.randn(200), torch.randn(200)  # a signature no other test tunes
    exported = torch.export.export(Wrapper(around_add), (x, y))
    assert _add_op.name.replace("::", ".") in exported.graph_module.code
    assert not selections_of(_add, (200,))
    torch.testing.assert_close(exported.module()(x, y), 2 * x + y + 1)
    assert len(selections_of(_add, (200,))) == 1


def selections_of(selector: Selector, size: tuple[int, ...]) -> list[object]:
    """The selections `selector` made for a first input of this size."""
    return [r for r in selector.records.values() if r.signature.tensor(0).size == size]


def test_a_compiled_program_selects_again_after_the_selector_forgets() -> None:
    selector = Selector("add", [extern(slow_add), extern(fast_add)])
    add = selector.as_op(fresh("add"))  # schema and fake from the reference, slow_add
    compiled = torch.compile(lambda x, y: add(x, y) * 2, backend="aot_eager", fullgraph=True)
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    torch.testing.assert_close(compiled(x, y), 2 * (x + y))
    first = selector.last_selection
    assert first is not None and first.best == "fast_add" and not first.from_store
    selector.clear()
    torch.testing.assert_close(compiled(x, y), 2 * (x + y))
    again = selector.last_selection
    assert again is not None and again is not first and again.from_store  # selected by the compiled call


def test_eager_calls_are_the_selectors_own_not_the_dispatchers() -> None:
    selector = Selector("add", [extern(fast_add)])
    add = selector.as_op(fresh("add"))
    x = torch.randn(8)
    torch.testing.assert_close(add(x, x), 2 * x)
    with torch.profiler.profile() as profile:
        add(x, x)
    names = [event.name for event in profile.events()]
    assert "aten::add" in names and add.name not in names
    with torch.profiler.profile() as profile:
        add.overload(x, x)
    assert add.name in [event.name for event in profile.events()]


def test_fake_tensors_get_the_output_from_the_given_fake_and_select_nothing() -> None:
    def transposed(x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous().t()  # a column-major copy

    def transposed_fake(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape[::-1]).t()

    selector = Selector("column_major", [extern(transposed)])
    op = selector.as_op(fresh("column_major"), fake=transposed_fake)
    assert op.schema.endswith("(Tensor x) -> Tensor")
    with FakeTensorMode():
        out = op(torch.empty(3, 5))
    assert out.shape == (3, 5) and out.stride() == (1, 3)
    assert not selector.records
    real = op(torch.randn(3, 5))
    assert real.stride() == (1, 3) and len(selector.records) == 1


def test_a_triton_reference_needs_a_fake() -> None:
    only_triton = Selector(
        "add",
        [triton_choice(add_kernel, grid=lambda meta: (1,), configs=[Config({"BLOCK": 64})], bind=bind)],
    )
    with pytest.raises(
        OperatorError, match=r"has no extern choice or reference function .* pass as_op\(fake=\.\.\.\)"
    ):
        only_triton.as_op(fresh("add"), schema="(Tensor x, Tensor y) -> Tensor")

    def add_fake(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    op = only_triton.as_op(fresh("add"), fake=add_fake)
    x = torch.arange(64.0)
    torch.testing.assert_close(op(x, x), 2 * x)


def test_a_reference_that_reads_data_fails_tracing_with_what_to_do() -> None:
    def shifted(x: torch.Tensor) -> torch.Tensor:
        return x - float(x.min())  # reads a value: cannot run without data

    op = Selector("shifted", [extern(shifted)]).as_op(fresh("shifted"))
    with FakeTensorMode(), pytest.raises(OperatorError, match=r"reference of selector `shifted`.*fake="):
        op(torch.empty(4))


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("no_namespace", {"fake": fast_add}, "'namespace::name'"),
        (None, {}, r"cannot infer a schema .* as_op\(schema="),  # torch.add has no annotations
        (
            None,
            {"fake": fast_add, "schema": "(Tensor(a!) x, Tensor y) -> Tensor"},
            "writes none of its inputs",
        ),
        (None, {"fake": fast_add, "schema": "(Tensor x, Tensor y) -> Tensr"}, "does not parse"),
    ],
)
def test_malformed_operators_are_refused_with_what_to_write(
    name: str | None, kwargs: dict[str, object], message: str
) -> None:
    selector = Selector("add", [extern(torch.add)])
    with pytest.raises(OperatorError, match=message):
        selector.as_op(name or fresh("add"), **kwargs)  # type: ignore[arg-type]


def test_a_name_is_taken_once() -> None:
    name = fresh("add")
    Selector("add", [extern(fast_add)]).as_op(name)
    with pytest.raises(OperatorError, match="already exists"):
        Selector("add", [extern(fast_add)]).as_op(name)


def test_through_the_dispatcher_plain_tensors_run_the_selection_and_grads_are_refused_at_backward() -> None:
    selector = Selector("add", [extern(fast_add)])
    add = selector.as_op(fresh("add"))
    x, y = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(add.overload(x, y), x + y)
    with torch.inference_mode():  # no Autograd key: straight to the implementation
        torch.testing.assert_close(add.overload(x, y), x + y)
    leaf = torch.randn(8, requires_grad=True)
    out = add.overload(leaf, y)
    torch.testing.assert_close(out, leaf.detach() + y)
    assert out.requires_grad, "an output of an input that requires grad is part of the graph"
    with pytest.raises(RuntimeError, match="no autograd formula"):
        out.sum().backward()
    with torch.no_grad():
        assert not add.overload(leaf, y).requires_grad


def test_through_the_dispatcher_fake_and_functional_tensors_reach_the_fake() -> None:
    calls: list[str] = []

    def fake(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls.append("fake")
        return torch.empty_like(x)

    selector = Selector("add", [extern(fast_add)])
    add = selector.as_op(fresh("add"), fake=fake)
    with FakeTensorMode() as mode:
        out = add.overload(mode.from_tensor(torch.randn(4)), mode.from_tensor(torch.randn(4)))
    assert out.shape == (4,) and calls == ["fake"] and not selector.records
    traced = torch.func.functionalize(lambda x, y: add.overload(x, y) * 2)
    x = torch.randn(4)
    torch.testing.assert_close(traced(x, x), 4 * x)  # the functional wrapper unwrapped below Autograd


def template_only_op() -> tuple[Selector, Any, str]:
    """A selector whose one choice is a built-in GEMM template, as an operator taking (a, b)."""
    from kernelpick.ops.gemm import _constants, builtin_template
    from kernelpick.ops.gemm_configs import gemm_configs
    from kernelpick.ops.gemm_templates import GEMM
    from kernelpick.store import MemoryStore

    space = gemm_configs(0, 1)
    template = builtin_template(
        GEMM, lambda signature: list(space(signature))[:1], _constants(False), "triton_mm"
    )
    selector = Selector("template only", [template], store=MemoryStore())
    name = fresh("template_mm")
    return selector, selector.as_op(name, fake=torch.mm, schema="(Tensor a, Tensor b) -> Tensor"), name


def test_a_traced_call_whose_pick_is_a_template_launches_its_kernel_with_wrap_triton(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What AOTAutograd hands Inductor: the rendered kernel's launch (Inductor launches it from its own
    # code), not the operator. On the CPU the graph is only made, as it would be for a GPU's tensors.
    from torch._functorch.aot_autograd import aot_export_module

    from kernelpick.select import selector_op

    selector, op, name = template_only_op()

    class Product(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor]:
            return (op(a, b),)

    a, b = torch.randn(16, 32), torch.randn(32, 16)
    with settings.override(compiled_picks="library"):  # PyTorch functions only
        kept, _ = aot_export_module(Product(), [a, b], trace_joint=False)
    assert name.split("::")[1] in kept.code and len(selector.records) == 1  # tuned while tracing
    on_cpu, _ = aot_export_module(Product(), [a, b], trace_joint=False)  # Inductor runs no Triton here
    assert name.split("::")[1] in on_cpu.code and "triton_kernel_wrapper" not in on_cpu.code
    monkeypatch.setattr(selector_op, "_inductor_runs_triton", lambda signature: True)  # as for a GPU
    graph, _ = aot_export_module(Product(), [a, b], trace_joint=False)  # by default, templates go too
    assert "triton_kernel_wrapper_functional" in graph.code, graph.code
    assert name.split("::")[1] not in graph.code, graph.code
    assert "'OUT': empty_strided" in graph.code  # the output the kernel writes, allocated in the graph


def test_a_template_pick_of_cpu_tensors_compiles_with_inductor() -> None:
    # Inductor compiles no Triton kernel for CPU tensors: the graph keeps the operator, which runs the
    # pick in Triton's interpreter (the template's launch in the graph failed: "0 active drivers").
    selector, op, _ = template_only_op()
    a, b = torch.randn(16, 32), torch.randn(32, 16)
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        out = torch.compile(lambda x, y: op(x, y) * 2, fullgraph=True)(a, b)
    torch.testing.assert_close(out, 2 * (a @ b), rtol=1e-4, atol=1e-4)
    assert selector.last_selection is not None and selector.last_selection.best_name.startswith("triton_mm")
