"""`kernelpick.launch` (the mutating form) and `kernelpick.functional` (the functional form) of a kernel launch.

Both launch directly in eager mode (CPU tensors in Triton's interpreter). Under a tracer
(`torch.compile`, `torch.export`, `make_fx`, `FakeTensorMode`, functionalization) they record one
`kernelpick::functional_launch` operator instead, which names the kernel and the launch's constant
arguments by side-table ids; `launch` then copies the returned clones back into its arguments with
`copy_`, which functionalization understands.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from kernelpick.analysis import analyze
from kernelpick.analysis.unwrap import innermost
from kernelpick.errors import AnalysisError, OperatorError
from kernelpick.pytorch.hooks import Launch, current_handler
from kernelpick.pytorch.library import LaunchPlan, Slot, clone_preserving_strides, functional_launch
from kernelpick.pytorch.recording import isolated
from kernelpick.pytorch.running import kernel_name, run_kernel, tensors_in
from kernelpick.pytorch.side_table import side_table

_is_compiling = torch.compiler.is_compiling
_F = TypeVar("_F", bound=Callable[..., Any])
#: Dynamo runs such a function for real while tracing and keeps its result as a constant.
_constant_result: Callable[[_F], _F] = torch.compiler.assume_constant_result
_dispatch_modes = torch._C._len_torch_dispatch_stack
_transforms = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """Launch `kernel[grid](*args, **kwargs)` in place, in a way every PyTorch tracer understands.

    In eager mode this is the launch itself (CPU tensors run in Triton's interpreter). Under
    `torch.compile`, `torch.export`, `make_fx`, fake tensors or functionalization, it records the
    functional form plus a `copy_` into each tensor the kernel writes.

    Args:
        kernel: a `triton.jit` function, or a `triton.autotune` / `triton.heuristics` /
            `kernelpick.autotune` wrapper of one.
        grid: a tuple, or a function of the meta-parameters returning one.
        *args: the kernel's arguments by position.
        **kwargs: by name (constexprs and compile options included).

    Raises:
        OperatorError: under a tracer, an argument the graph cannot carry (a tuple of tensors, a
            tensor descriptor), or a grid function that fails for a config.
    """
    if _is_compiling() or _tracing(args, kwargs):
        _, tensors, written, outputs = _traced(kernel, grid, args, kwargs)
        for index, output in zip(written, outputs):
            tensors[index].copy_(output)
        return
    handler = current_handler()
    if handler is not None:
        handler(Launch(kernel, grid, args, kwargs), None)
        return
    run_kernel(kernel, grid, args, kwargs)


def functional(kernel: Any) -> FunctionalKernel:
    """The functional form of `kernel`: clones exactly what it writes, launches on the clones, returns them.

    `functional(kernel)(grid, *args, **kwargs)` (or `functional(kernel)[grid](*args, **kwargs)`)
    leaves every argument untouched and returns `{argument name: written clone}`; clones keep the
    written tensors' sizes and strides. Which arguments the kernel writes comes from the access
    analysis (every tensor argument when the analysis is unsure).
    """
    return FunctionalKernel(kernel)


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionalKernel:
    """A kernel wrapped by `functional`: calls return the clones it wrote, by argument name."""

    kernel: Any

    def __getitem__(self, grid: Any) -> Callable[..., dict[str, torch.Tensor]]:
        return lambda *args, **kwargs: self(grid, *args, **kwargs)

    def __call__(self, grid: Any, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        """Launch on clones of the written tensors and return them by argument name.

        Raises:
            OperatorError: the arguments do not fit the kernel, or (under a tracer) cannot be carried
                by a graph.
        """
        kernel = self.kernel
        if _is_compiling() or _tracing(args, kwargs):
            names, tensors, written, outputs = _traced(kernel, grid, args, kwargs)
            clones = dict(zip(written, outputs))
            named = {**dict(zip(names, args)), **kwargs}
            return {
                name: clones[index]
                for name, value in named.items()
                if isinstance(value, torch.Tensor)
                for index in [_position(tensors, value)]
                if index in clones
            }
        return _functional_eager(kernel, _parameter_names(kernel), grid, args, kwargs)


def _functional_eager(
    kernel: Any, names: list[str], grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, torch.Tensor]:
    written = _written(kernel, args, kwargs)
    clones: dict[int, torch.Tensor] = {}  # by id of the original: a tensor passed twice is cloned once

    def cloned(name: str, value: Any) -> Any:
        if name not in written:
            return value
        if isinstance(value, torch.Tensor):
            if id(value) not in clones:
                clones[id(value)] = clone_preserving_strides(value)
            return clones[id(value)]
        base = getattr(value, "base", None)
        if isinstance(base, torch.Tensor) and dataclasses.is_dataclass(value):  # a TensorDescriptor
            if id(base) not in clones:
                clones[id(base)] = clone_preserving_strides(base)
            return dataclasses.replace(value, base=clones[id(base)])  # type: ignore[type-var]
        return value

    new_args = tuple(cloned(name, value) for name, value in zip(names, args))
    new_kwargs = {name: cloned(name, value) for name, value in kwargs.items()}
    handler = current_handler()
    if handler is not None:
        handler(Launch(kernel, grid, new_args, new_kwargs), None)
    else:
        run_kernel(kernel, grid, new_args, new_kwargs)
    named = {**dict(zip(names, args)), **kwargs}
    result = {}
    for name in written:
        value = named.get(name)
        original = value if isinstance(value, torch.Tensor) else getattr(value, "base", None)
        if isinstance(original, torch.Tensor) and id(original) in clones:
            result[name] = clones[id(original)]
    return result


def _written(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
    try:
        return analyze(kernel, *args, **kwargs).mutated
    except AnalysisError as error:
        raise OperatorError(f"cannot launch `{kernel_name(kernel)}` functionally: {error}") from error


def _tracing(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tracer is active or the arguments are a tracer's tensors (fake, functional, ...)."""
    if _dispatch_modes() or _transforms():
        return True
    for tensor in tensors_in((*args, *kwargs.values())):
        if type(tensor) is not torch.Tensor and type(tensor) is not torch.nn.Parameter:
            return True
    return False


# -- the traced form -----------------------------------------------------------------------------
@_constant_result
def _kernel_facts(
    kernel: Any,
) -> tuple[int, tuple[str, ...], tuple[str, ...], tuple[tuple[str, Any], ...], Any]:
    """(kernel id, parameter names, constexpr names, defaults, configs' meta-parameters or None).

    Computed outside Dynamo's tracing (it runs this for real and keeps the result as a constant).
    """
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


@_constant_result
def _plan_id(
    kernel: Any, parts: tuple[Any, ...], dtypes: tuple[Any, ...], hints: tuple[Any, ...]
) -> tuple[int, tuple[int, ...]]:
    """(plan id, written tensor indices) of the `LaunchPlan` made of `parts`, completed by the analysis.

    Takes plain tuples, not a plan: Dynamo passes only constants into functions it runs for real.
    """
    plan = LaunchPlan(*parts)
    with isolated():  # tracers must not record the stand-in tensors
        tensors = [torch.empty(0, dtype=dtype, device="meta") for dtype in dtypes]
        ints = [2 if hint is None else hint for hint in hints]
        args, kwargs, _ = plan.launch_arguments(tensors, ints)
        try:
            access = analyze(kernel, *args, **kwargs)
        except AnalysisError as error:
            raise OperatorError(f"cannot trace a launch of `{kernel_name(kernel)}`: {error}") from error
    names = list(getattr(innermost(kernel), "arg_names", ()))
    named_slots = {**dict(zip(names, plan.positional)), **dict(plan.keywords)}
    written = sorted(
        {named_slots[n][1] for n in access.mutated if n in named_slots and named_slots[n][0] == "tensor"}
    )
    complete = dataclasses.replace(plan, written=tuple(written))
    return side_table.add_constant(complete), tuple(written)


def _traced(
    kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[str, ...], list[torch.Tensor], tuple[int, ...], list[torch.Tensor]]:
    """Record the functional form: (parameter names, the distinct tensors, which are written, their clones)."""
    kernel_id, names, constexprs, defaults, configs = _kernel_facts(kernel)
    tensors: list[torch.Tensor] = []
    ints: list[Any] = []

    def slot(name: str, value: Any) -> Slot:
        if isinstance(value, torch.Tensor):
            index = _position(tensors, value)
            if index < 0:
                tensors.append(value)
                index = len(tensors) - 1
            return ("tensor", index)
        if name not in constexprs and isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            ints.append(value)
            return ("int", len(ints) - 1)
        if any(True for _ in tensors_in([value])):
            raise OperatorError(
                f"argument `{name}` of kernel `{kernel_name(kernel)}` holds tensors inside a "
                f"{type(value).__name__}; under a tracer kernelpick can only pass tensors as arguments "
                "of their own: pass the tensor and build the descriptor inside the kernel"
            )
        return ("constant", value)

    positional = tuple(slot(name, value) for name, value in zip(names, args))
    keywords = tuple((name, slot(name, value)) for name, value in kwargs.items())
    meta = {**dict(defaults), **dict(zip(names, args)), **kwargs}
    grid_slots, by_config = _grid_slots(kernel, grid, meta, configs, ints)
    dtypes = tuple(t.dtype for t in tensors)
    # Dynamo cannot tell a symbolic integer from a plain one (both are `int` to traced code).
    hints = tuple(None if _is_compiling() or type(v) is not int else v for v in ints)
    plan_id, written = _plan_id(kernel, (positional, keywords, grid_slots, by_config), dtypes, hints)
    outputs = functional_launch(kernel_id, plan_id, tensors, ints)
    return names, tensors, written, outputs


def _grid_slots(
    kernel: Any, grid: Any, meta: dict[str, Any], configs: Any, ints: list[Any]
) -> tuple[tuple[Slot, ...], tuple[Any, ...]]:
    def dimension(value: Any) -> Slot:
        if isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            ints.append(value)
            return ("int", len(ints) - 1)
        raise OperatorError(
            f"grid of kernel `{kernel_name(kernel)}` has a dimension {value!r}; expected integers"
        )

    if not callable(grid):
        return tuple(dimension(v) for v in grid), ()
    if configs is None:
        return tuple(dimension(v) for v in grid(meta)), ()
    table = []
    for config in configs:
        table.append((config, tuple(dimension(v) for v in grid({**meta, **dict(config)}))))
    return (), tuple(table)


def _position(tensors: list[torch.Tensor], value: torch.Tensor) -> int:
    for index, seen in enumerate(tensors):
        if seen is value:
            return index
    return -1


def _parameter_names(kernel: Any) -> list[str]:
    return list(getattr(innermost(kernel), "arg_names", ()))
