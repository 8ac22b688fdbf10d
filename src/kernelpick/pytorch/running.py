"""Run one launch where its tensors live: compiled on a GPU, in Triton's interpreter on the CPU."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from kernelpick.compile.launch import interpret
from kernelpick.compile.unwrap import innermost, unwrap
from kernelpick.errors import KernelpickError, OperatorError
from kernelpick.pytorch.hooks import Launch, handling_launches, keep_installed, swap_handler
from kernelpick.tensors import is_descriptor


def tensors_in(values: Iterable[Any]) -> Iterator[torch.Tensor]:
    """The tensors among launch arguments, inside tuples and lists and under tensor descriptors."""
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from tensors_in(value)
        elif is_descriptor(value):
            yield value.base


def on_cpu(args: Iterable[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a launch's tensors are on the CPU (the first tensor decides, as for Triton)."""
    for tensor in tensors_in((*args, *kwargs.values())):
        return tensor.device.type == "cpu"
    return False


def run_kernel(kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Launch `kernel[grid](*args, **kwargs)`: on the GPU as Triton would, in the interpreter for CPU tensors.

    `kernelpick.autotune` kernels tune themselves in the interpreter. Triton's own autotuner cannot
    time configs there, so on the CPU its first config runs (after its heuristics, if any).

    Raises:
        OperatorError: a `triton.heuristics` function raised for these arguments.
    """
    if on_cpu(args, kwargs):
        return interpret_launch(kernel, grid, args, kwargs)
    return kernel.run(*args, grid=grid, warmup=False, **kwargs)


def interpret_launch(kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a launch in Triton's interpreter, whatever wrappers the kernel has."""
    from kernelpick.tune.autotuner import Autotuner

    if isinstance(kernel, Autotuner):
        return kernel.run(*args, grid=grid, warmup=False, **kwargs)
    unwrapped = unwrap(kernel, args, kwargs)
    if unwrapped.problem:
        raise OperatorError(
            f"cannot launch `{kernel_name(kernel)}` in Triton's interpreter: {unwrapped.problem}"
        )
    return interpret(unwrapped.kernel, *unwrapped.args, grid=grid, **unwrapped.kwargs)


def _route(launch: Launch, original: Callable[[], Any] | None) -> Any:
    if original is not None and not on_cpu(launch.args, launch.kwargs):
        return original()
    return run_kernel(launch.kernel, launch.grid, launch.args, launch.kwargs)


@contextmanager
def routing_cpu_launches() -> Iterator[None]:
    """Within the block, `kernel[grid](...)` on CPU tensors runs in the interpreter (this thread only).

    The launch methods stay patched afterwards (see `kernelpick.pytorch.hooks`).
    """
    with handling_launches(_route, keep_patches=True):
        yield


def kernel_name(kernel: Any) -> str:
    """The name of the `triton.jit` function inside `kernel`'s wrappers."""
    try:
        bottom = innermost(kernel)
    except KernelpickError:
        bottom = kernel
    return str(getattr(bottom, "__name__", None) or type(kernel).__name__)


def start_routing() -> Any:
    """Route this thread's CPU launches to the interpreter until `stop_routing(returned value)`.

    The same as `routing_cpu_launches`, without a context manager's cost, for the eager fast path.
    """
    keep_installed()
    return swap_handler(_route)


def stop_routing(previous: Any) -> None:
    """End what `start_routing` began, restoring the handler it returned."""
    swap_handler(previous)
