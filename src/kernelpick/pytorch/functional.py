"""`kernelpick.launch` (the mutating form) and `kernelpick.functional` (the functional form) of a launch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from kernelpick.analysis import analyze
from kernelpick.errors import AnalysisError, OperatorError
from kernelpick.pytorch.hooks import Launch, current_handler
from kernelpick.pytorch.library import clone_preserving_strides
from kernelpick.pytorch.running import kernel_name, run_kernel, tensors_in
from kernelpick.pytorch.traced import (
    KernelFacts,
    dynamo_needs_native_launch,
    kernels_interpreted,
    position,
    traced_kernel_facts,
    traced_launch,
)
from kernelpick.tensors import is_descriptor

_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_transforms = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """Launch `kernel[grid](*args, **kwargs)` in place, in a way every PyTorch tracer understands.

    In eager mode this is the launch itself (CPU tensors run in Triton's interpreter) and, like
    `kernel[grid](...)`, it leaves autograd's version counters alone. Under
    `torch.compile`, `torch.export`, `make_fx`, fake tensors or functionalization, it records the
    functional form plus a `copy_` into each tensor the kernel writes.

    Args:
        kernel: a `triton.jit` function, or a `triton.autotune` / `triton.heuristics` /
            `kernelpick.autotune` wrapper of one.
        grid: a tuple, or a function of the meta-parameters returning one.
        *args: the kernel's arguments by position.
        **kwargs: by name (constexprs and compile options included).

    Raises:
        OperatorError: under a tracer, an argument the graph cannot carry (a tuple of tensors; a
            tensor descriptor holding a tensor elsewhere than in its base), or a grid function that
            fails for a config.
    """
    if _is_compiling() or _tracing(args, kwargs):
        if dynamo_needs_native_launch():
            if kernels_interpreted():  # Triton's interpreter is Python Dynamo cannot trace: a graph break
                _launch_untraced(kernel, grid, args, kwargs)
            else:
                kernel[grid](*args, **kwargs)  # Dynamo's own support for user-defined Triton kernels
            return
        tensors, written, outputs = traced_launch(traced_kernel_facts(kernel), grid, args, kwargs)
        for index, output in zip(written, outputs):
            tensors[index].copy_(output)
        return
    _launch_eagerly(kernel, grid, args, kwargs)


def _launch_eagerly(kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    handler = current_handler()
    if handler is not None:
        handler(Launch(kernel, grid, args, kwargs), None)
        return
    run_kernel(kernel, grid, args, kwargs)


_launch_untraced: Callable[..., None] = torch.compiler.disable(_launch_eagerly)  # type: ignore[no-untyped-call]


def functional(kernel: Any) -> FunctionalKernel:
    """The functional form of `kernel`: clones exactly what it writes, launches on the clones, returns them.

    `functional(kernel)(grid, *args, **kwargs)` (or `functional(kernel)[grid](*args, **kwargs)`)
    leaves every argument untouched and returns `{argument name: written clone}`; clones keep the
    written tensors' sizes and strides. A kernel writing through a tensor descriptor is given a
    descriptor of the clone of its base, and that clone is returned under the descriptor's name.
    Which arguments the kernel writes comes from the access analysis (every tensor argument when
    the analysis is unsure).
    """
    return FunctionalKernel(kernel)


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionalKernel:
    """A kernel wrapped by `functional`: calls return the clones it wrote, by argument name.

    Attributes:
        kernel: the kernel.
        facts: what tracing needs to know about it, computed once here (so that on torch < 2.13,
            whose Dynamo cannot pass a kernel object to kernelpick, a `FunctionalKernel` made outside
            the compiled function can still be traced).
    """

    kernel: Any
    facts: KernelFacts = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", traced_kernel_facts(self.kernel))

    def __getitem__(self, grid: Any) -> Callable[..., dict[str, torch.Tensor]]:
        return lambda *args, **kwargs: self(grid, *args, **kwargs)

    def __call__(self, grid: Any, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        """Launch on clones of the written tensors and return them by argument name.

        Raises:
            OperatorError: the arguments do not fit the kernel, or (under a tracer) cannot be carried
                by a graph.
        """
        if _is_compiling() or _tracing(args, kwargs):
            facts = self.facts
            tensors, written, outputs = traced_launch(facts, grid, args, kwargs)
            clones = dict(zip(written, outputs))
            named = {**dict(zip(facts[1], args)), **kwargs}
            return {
                name: clones[index]
                for name, value in named.items()
                if isinstance(value, torch.Tensor) or is_descriptor(value)
                for index in [position(tensors, value.base if is_descriptor(value) else value)]
                if index in clones
            }
        return _functional_eager(self.kernel, list(self.facts[1]), grid, args, kwargs)


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
        if is_descriptor(value):
            base = value.base
            if id(base) not in clones:
                clones[id(base)] = clone_preserving_strides(base)
            return dataclasses.replace(value, base=clones[id(base)])
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
        value: Any = named.get(name)
        original = value.base if is_descriptor(value) else value  # a descriptor's clone is its base's
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
