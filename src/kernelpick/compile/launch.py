"""Launching Triton kernels where they can run: on a GPU, in the interpreter on a CPU, or in a worker."""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from triton.runtime.errors import InterpreterError
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernelpick.compile.interpreter import Patches, explain, extend
from kernelpick.compile.unwrap import KERNELS, innermost, unwrap
from kernelpick.device import DeviceInfo
from kernelpick.errors import ArgumentError, InterpretationError, describe_value
from kernelpick.signals import naming_crashes

#: By kernel id, each kernel with its interpreted function: held here, a kernel's id is never another's.
_keep_alive: dict[int, tuple[JITFunction[Any], InterpretedFunction[Any]]] = {}
#: Held while `triton.language` is patched for the interpreter; Triton's code generation takes it too,
#: since in another thread it would otherwise build IR with the interpreter's functions.
language_lock = threading.RLock()


def _interpreted_function(kernel: JITFunction[Any]) -> InterpretedFunction[Any]:
    # Keyed by id: hashing a JITFunction computes its source hash, which is slow.
    if id(kernel) not in _keep_alive:
        _keep_alive[id(kernel)] = (kernel, InterpretedFunction(kernel.fn))
    return _keep_alive[id(kernel)][1]


def _device_call(self: JITFunction[Any], *args: Any, **kwargs: Any) -> Any:
    # Like InterpretedFunction.__call__, but undoing its patches of `triton.language` afterwards:
    # left in place, they would break every later compilation in this process.
    from triton.runtime.interpreter import _patch_lang

    scope = _patch_lang(self.fn)
    try:
        return _interpreted_function(self).rewrite()(*args, **kwargs)
    finally:
        scope.restore()


@contextmanager
def interpreting() -> Iterator[None]:
    """Run kernels and their `@triton.jit` helpers in Triton's interpreter as they run on a GPU, for the
    block (`kernelpick.compile.interpreter`); all is put back when it ends, `tl` after each launch."""
    with language_lock:
        if JITFunction.__call__ is _device_call:  # already in place: entered again by the same thread
            yield
            return
        patches = Patches()
        try:
            patches.set_attr(JITFunction, "__call__", _device_call)
            extend(patches)
            yield
        finally:
            patches.restore()


def interpret(kernel: Any, *args: Any, grid: Any, **kwargs: Any) -> Any:
    """Launch `kernel` (a `triton.jit` function, possibly under `triton.heuristics`) in the interpreter.

    Raises:
        TypeError: `kernel` is not a Triton kernel or a wrapper of one.
        RuntimeError: a `triton.heuristics` function raised for these arguments.
        InterpretationError: the kernel failed in the interpreter; the message names the line.
    """
    if not isinstance(kernel, KERNELS):
        if not isinstance(innermost(kernel), KERNELS):
            raise TypeError(f"cannot run {type(kernel).__name__} in Triton's interpreter")
        unwrapped = unwrap(kernel, args, kwargs)
        if unwrapped.problem:
            raise RuntimeError(unwrapped.problem)
        kernel, kwargs = unwrapped.kernel, unwrapped.kwargs
    function = kernel if isinstance(kernel, InterpretedFunction) else _interpreted_function(kernel)
    if callable(grid):
        # Evaluated here, on the plain arguments, as a GPU launch does: Triton 3.6's interpreter
        # passes the grid function its arguments as one-element arrays, and NumPy 2.4 refuses to
        # turn the result (`triton.cdiv(n, BLOCK)`) into a loop bound.
        signature = inspect.signature(function.fn)
        named = {k: v for k, v in kwargs.items() if k in signature.parameters}  # not num_warps, ...
        bound = signature.bind_partial(*args, **named)
        bound.apply_defaults()
        grid = tuple(int(n) for n in grid(dict(bound.arguments)))
    try:
        with interpreting(), naming_crashes(getattr(function.fn, "__name__", "?")):
            return function.run(*args, grid=grid, warmup=False, **kwargs)
    except InterpretationError:
        raise
    except InterpreterError as error:  # the kernel's own failure, wrapped by the interpreter
        raise explain(function.fn, error) from error


def runner(kernel: Any, interpreter: bool) -> Callable[..., Any]:
    """`kernel`'s `run(*args, grid=, warmup=, **kwargs)`: Triton's own on a GPU; on a CPU one that
    interprets it (a warm-up launches nothing there)."""

    def interpreted(*args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        return None if warmup else interpret(kernel, *args, grid=grid, **kwargs)

    return interpreted if interpreter else kernel.run


@dataclass(frozen=True)
class KernelLaunch:
    """One config of a tuned kernel as a candidate a worker can run: `kernel` launched with `meta` (a
    config's meta-parameters and options) on `grid`. A worker gets the configs of one kernel without it
    (`kernel` None, a few bytes each) and the kernel once, with the problem, and puts them together."""

    name: str
    meta: Mapping[str, Any]
    grid: tuple[int, ...]
    kernel: Any = None
    interpreter: bool = False

    def compile_job(self, example: Any, device: DeviceInfo) -> None:
        """Nothing to compile: the caller compiled every config before sending any."""

    def callable(self) -> Callable[..., Any]:
        return functools.partial(launcher(self.kernel, self.interpreter), grid=self.grid, **self.meta)


def launcher(kernel: Any, interpreter: bool) -> Callable[..., Any]:
    """A function launching `kernel` as `launch(*args, grid=grid, **kwargs)` on a GPU or in the interpreter."""
    return functools.partial(runner(kernel, interpreter), warmup=False)


class FixedLaunch:
    """`launch(*args, grid=grid, **options)` for a kernel whose every call has the same arguments' kinds,
    sizes and alignment, options and grid (a template rendered for one signature): after Triton's `run`
    compiled it, calls launch the `CompiledKernel` through its own runner (docs/design.md, "Selection").
    While the current device is not the one the kernel was loaded on, or for a kernel with constexpr
    parameters or pre-run hooks, every call is Triton's `run`. Given the index of its tensors' GPU, it
    launches there whatever the current device is, as torch's operators do. Triton's compile-time knobs
    (`TRITON_DEBUG`, instrumentation) are read at the first call."""

    __slots__ = ("device", "index", "kernel", "runner")

    def __init__(self, kernel: JITFunction[Any], index: int | None = None) -> None:
        self.kernel = kernel
        self.index = index
        self.runner: Callable[..., Any] | None = None
        self.device = -1

    def __call__(self, *args: Any, grid: Any, **options: Any) -> Any:
        runner = self.runner
        current = _current_device()
        if runner is not None and current == self.device:
            return runner(*args)
        if self.index is not None and current != self.index:
            with torch.cuda.device(self.index):
                return self(*args, grid=grid, **options)
        compiled = self.kernel.run(*args, grid=grid, warmup=False, **options)
        kernel = self.kernel
        if (
            compiled is not None
            and not callable(grid)
            and len(args) == len(kernel.params)
            and not any(p.is_constexpr for p in kernel.params)
            and not kernel.pre_run_hooks
            and not kernel.used_global_vals
        ):
            self.runner, self.device = compiled[(*grid, 1, 1)[:3]], current
        return compiled


def _current_device() -> int:
    # Looked up at each call, not bound at import: a CPU-only torch has no `_cuda_getDevice`.
    return int(torch._C._cuda_getDevice())


def fixed_launcher(kernel: Any, interpreter: bool, index: int | None = None) -> Callable[..., Any]:
    """`launcher` for a kernel launched with one specialization, options and grid (`FixedLaunch`), on
    GPU `index` (None: the current device)."""
    if interpreter or not isinstance(kernel, JITFunction):
        return launcher(kernel, interpreter)
    return FixedLaunch(kernel, index)


def unpassable(value: Any) -> str | None:
    """What `value` is and why Triton cannot pass it to a kernel ("a list: Triton passes ...; pass a
    tuple") for a list, a dict or a set; None for anything else."""
    # Given one, Triton stops with "failed to specialize argument of type: list".
    if not isinstance(value, (list, dict, set, frozenset)):
        return None
    fix = "pass its values as arguments of their own" if isinstance(value, dict) else "pass a tuple"
    return (
        f"a {type(value).__name__}: Triton passes tensors, tensor descriptors, numbers (int, float, "
        f"bool), None, strings, dtypes and tuples of these; {fix}"
    )


def check_launch_arguments(
    kernel: str, arg_names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    """Refuse, by name, an argument a kernel cannot be launched with: a meta tensor (there is no data
    to run on) or a value Triton cannot pass (`unpassable`). For a call's slow path: Triton's own
    complaint, or a launch that reads no memory, would come later and name no argument.

    Raises:
        ArgumentError: the message names the argument, what it is and what is expected.
    """
    for name, value in (*zip(arg_names, args), *kwargs.items()):
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, torch.Tensor) and item.device.type == "meta":
                raise ArgumentError(
                    f"argument `{name}` of kernel `{kernel}` is a meta tensor ({describe_value(item)}): "
                    "kernels launch on tensors with data, on a GPU or the CPU; `kernelpick.analyze` "
                    "tells what a kernel reads and writes from meta tensors"
                )
        problem = unpassable(value)
        if problem is not None:
            raise ArgumentError(f"argument `{name}` of kernel `{kernel}` is {problem}")
