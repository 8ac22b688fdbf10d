"""The traced form of a launch: one `kernelpick::functional_launch` node, its constants in the side table."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import triton
from torch.fx.experimental.symbolic_shapes import guard_scalar

from kernelpick.analysis import analyze
from kernelpick.compile.unwrap import innermost
from kernelpick.errors import AnalysisError, OperatorError
from kernelpick.pytorch.descriptors import SIZE_FIELDS, metadata
from kernelpick.pytorch.launch_tracing import isolated
from kernelpick.pytorch.library import LaunchPlan, Slot, functional_launch
from kernelpick.pytorch.running import kernel_name, tensors_in
from kernelpick.pytorch.side_table import side_table
from kernelpick.tensors import is_descriptor

_F = TypeVar("_F", bound=Callable[..., Any])
#: Dynamo runs such a function for real while tracing and keeps its result as a constant: facts about
#: the kernel and the launch plan are computed so, and traced code holds only integers and tuples.
_constant_result: Callable[[_F], _F] = torch.compiler.assume_constant_result
_is_compiling = torch.compiler.is_compiling

#: (kernel id, parameter names, constexpr names, parameter defaults, each config's meta-parameters or None)
KernelFacts = tuple[int, tuple[str, ...], tuple[str, ...], tuple[tuple[str, Any], ...], Any]


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


#: Whether Dynamo can hand a Triton kernel object to a function it runs for real. Torch 2.13 can;
#: torch 2.11's Dynamo supports nothing on a `triton.jit` object but launching it (no id(), no
#: attribute, no `is`), so there a raw kernel is launched through Dynamo's own Triton support.
DYNAMO_TAKES_KERNELS = _torch_version() >= (2, 13)
_dynamo_compiling: Callable[[], bool] = getattr(torch.compiler, "is_dynamo_compiling", _is_compiling)


def dynamo_needs_native_launch() -> bool:
    """Whether this is Dynamo tracing on a torch whose Dynamo cannot pass kernels to kernelpick."""
    return not DYNAMO_TAKES_KERNELS and _dynamo_compiling()


@_constant_result
def kernels_interpreted() -> bool:
    """Whether `@triton.jit` makes functions Triton's interpreter runs (TRITON_INTERPRET=1)."""
    return bool(triton.knobs.runtime.interpret)


def kernel_facts(kernel: Any) -> KernelFacts:
    """What tracing needs to know about `kernel`; adds it to the side table."""
    bottom = innermost(kernel)
    params = list(getattr(bottom, "params", ()))
    names = tuple(getattr(bottom, "arg_names", ()) or (p.name for p in params))
    constexprs = tuple(p.name for p in params if p.is_constexpr)
    defaults = tuple(
        (p.name, p.default)
        for p in params
        if getattr(p, "default", inspect.Parameter.empty) is not inspect.Parameter.empty
    )
    configs = None
    wrapper = kernel
    while wrapper is not bottom:
        if isinstance(getattr(wrapper, "configs", None), (list, tuple)):
            configs = tuple(tuple(sorted(dict(c.kwargs).items())) for c in wrapper.configs)
            break
        wrapper = wrapper.fn
    return side_table.add_kernel(kernel), names, constexprs, defaults, configs


#: `kernel_facts` as Dynamo sees it: run for real, its result kept as a constant.
traced_kernel_facts = _constant_result(kernel_facts)


@_constant_result
def _plan_id(
    kernel_id: int, parts: tuple[Any, ...], dtypes: tuple[Any, ...], hints: tuple[Any, ...]
) -> tuple[int, tuple[int, ...]]:
    """(plan id, written tensor indices) of the `LaunchPlan` made of `parts`, completed by the analysis.

    Takes plain tuples, not a plan: Dynamo passes only constants into functions it runs for real.
    """
    kernel = side_table.kernel(kernel_id)
    plan = LaunchPlan(*parts)
    with isolated():  # tracers must not record the stand-in tensors
        tensors = [torch.empty(0, dtype=dtype, device="meta") for dtype in dtypes]
        ints = [2 if hint is None else hint for hint in hints]
        args, kwargs, _ = plan.launch_arguments(tensors, ints, stand_in=True)
        try:
            access = analyze(kernel, *args, **kwargs)
        except AnalysisError as error:
            raise OperatorError(f"cannot trace a launch of `{kernel_name(kernel)}`: {error}") from error
    names = list(getattr(innermost(kernel), "arg_names", ()))
    named_slots = {**dict(zip(names, plan.positional)), **dict(plan.keywords)}
    written = sorted(
        {index for n in access.mutated if n in named_slots for index in _tensor_of(named_slots[n])}
    )
    complete = dataclasses.replace(plan, written=tuple(written))
    return side_table.add_constant(complete), tuple(written)


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool)


def _specialized(value: Any) -> Any:
    """A plain integer for a symbolic one (guarded, under any tracer); anything else as it is."""
    return guard_scalar(value) if _is_integer(value) else value


def _tensor_of(slot: Slot) -> tuple[int, ...]:
    """The index of the tensor an argument's slot stands for (a descriptor's base), if any."""
    kind, payload = slot
    if kind == "tensor":
        return (payload,)
    if kind == "descriptor":
        return (payload[1],)
    return ()


def traced_launch(
    facts: KernelFacts, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[torch.Tensor], tuple[int, ...], list[torch.Tensor]]:
    """Record the functional form of a launch: (the distinct tensors, which are written, their clones).

    Raises:
        OperatorError: an argument holds tensors inside another object than a tensor descriptor (or
            in a descriptor field other than its base), or a grid is not integers.
    """
    kernel_id, names, constexprs, defaults, configs = facts
    tensors: list[torch.Tensor] = []
    ints: list[Any] = []

    def tensor_slot(value: torch.Tensor) -> Slot:
        index = position(tensors, value)
        if index < 0:
            tensors.append(value)
            index = len(tensors) - 1
        return ("tensor", index)

    def int_slot(value: Any) -> Slot:
        ints.append(value)
        return ("int", len(ints) - 1)

    def descriptor_field(name: str, field: str, value: Any) -> Slot:
        if field in SIZE_FIELDS and isinstance(value, (list, tuple)) and all(_is_integer(v) for v in value):
            return ("sequence", tuple(int_slot(v) for v in value))  # torch.Size included; may be symbolic
        items = value if isinstance(value, (list, tuple)) else (value,)
        if any(isinstance(v, (torch.Tensor, torch.SymFloat, torch.SymBool)) for v in items):
            raise OperatorError(
                f"argument `{name}` of kernel `{_kernel_name(kernel_id)}` is a tensor descriptor whose "
                f"`{field}` is {value!r}; under a tracer only a descriptor's base may be a tensor and only "
                f"its shape and strides may be symbolic: give `{field}` as plain Python values"
            )
        # The block shape decides the kernel's types, as a constexpr does: a symbolic one (Dynamo
        # makes the integers of an input object symbolic under dynamic=True) is specialized, with a
        # guard, to the value it has.
        if isinstance(value, (list, tuple)):
            return ("sequence", tuple(("constant", _specialized(v)) for v in value))
        return ("constant", _specialized(value))

    def slot(name: str, value: Any) -> Slot:
        if isinstance(value, torch.Tensor):
            return tensor_slot(value)
        if name not in constexprs and _is_integer(value):
            return int_slot(value)
        if is_descriptor(value):  # its base goes through the graph; it is made again at launch
            fields = tuple((field, descriptor_field(name, field, v)) for field, v in metadata(value))
            return ("descriptor", (type(value), tensor_slot(value.base)[1], fields))
        if any(True for _ in tensors_in([value])):
            raise OperatorError(
                f"argument `{name}` of kernel `{_kernel_name(kernel_id)}` holds tensors inside a "
                f"{type(value).__name__}; under a tracer kernelpick can only pass tensors as arguments "
                "of their own or as the base of a tensor descriptor: pass each tensor as an argument"
            )
        return ("constant", value)

    positional = tuple(slot(name, value) for name, value in zip(names, args))
    keywords = tuple((name, slot(name, value)) for name, value in kwargs.items())
    meta = {**dict(defaults), **dict(zip(names, args)), **kwargs}
    grid_slots, by_config = _grid_slots(kernel_id, grid, meta, configs, ints)
    dtypes = tuple(t.dtype for t in tensors)
    # Dynamo cannot tell a symbolic integer from a plain one (both are `int` to traced code).
    hints = tuple(None if _is_compiling() or type(v) is not int else v for v in ints)
    plan_id, written = _plan_id(kernel_id, (positional, keywords, grid_slots, by_config), dtypes, hints)
    outputs = functional_launch(kernel_id, plan_id, tensors, ints)
    return tensors, written, outputs


def _grid_slots(
    kernel_id: int, grid: Any, meta: dict[str, Any], configs: Any, ints: list[Any]
) -> tuple[tuple[Slot, ...], tuple[Any, ...]]:
    def dimension(value: Any) -> Slot:
        if _is_integer(value):
            ints.append(value)
            return ("int", len(ints) - 1)
        raise OperatorError(
            f"grid of kernel `{_kernel_name(kernel_id)}` has a dimension {value!r}; expected integers"
        )

    if not callable(grid):
        return tuple(dimension(v) for v in grid), ()
    if configs is None:
        return tuple(dimension(v) for v in grid(meta)), ()
    table = []
    for config in configs:  # the grid of each config a tuner may pick, evaluated now
        table.append((config, tuple(dimension(v) for v in grid({**meta, **dict(config)}))))
    return (), tuple(table)


def _kernel_name(kernel_id: int) -> str:
    return kernel_name(side_table.kernel(kernel_id))


def position(tensors: list[torch.Tensor], value: torch.Tensor) -> int:
    """The index of `value` (the same object) in `tensors`, or -1."""
    for index, seen in enumerate(tensors):
        if seen is value:
            return index
    return -1
