"""A `kernelpick.op` in a compiled graph: its function traced, each launch made by Inductor's own code."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import torch

from kernelpick import settings
from kernelpick.config import OPTION_DEFAULTS
from kernelpick.pytorch.hooks import Launch, handling_launches, suspended
from kernelpick.pytorch.running import kernel_name, on_cpu
from kernelpick.select.template_choice import wrap_triton_launch
from kernelpick.tensors import is_descriptor

log = logging.getLogger("kernelpick.pytorch")

#: Launch options a launch may pass beside the kernel's arguments (`triton.Config`'s).
_OPTIONS = frozenset(OPTION_DEFAULTS)


class NotTraceable(Exception):
    """A launch `wrap_triton` cannot take: the graph keeps the operator."""


def traceable(launches: Iterable[Launch]) -> bool:
    """Whether every one of these launches (recorded when the operator was registered) can go through
    `wrap_triton`: a `triton.jit` kernel, or a `triton.autotune` of one given no launch options, and
    no tensor descriptor among the arguments (their traced form is kernelpick's own launch node)."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    return all(
        (
            isinstance(launch.kernel, JITFunction)
            or (isinstance(launch.kernel, Autotuner) and not _OPTIONS & set(launch.kwargs))
        )
        and not any(is_descriptor(value) for value in (*launch.args, *launch.kwargs.values()))
        for launch in launches
    )


def traced_rule(fn: Callable[..., Any], wanted: Callable[[], bool]) -> Callable[..., Any]:
    """The `FunctionalTensorMode` rule of an operator whose function is `fn`: `fn` itself with its
    launches through `wrap_triton` where `wanted()` (its recorded launches were all `traceable`), else
    the operator node."""

    def functional(mode: Any, op: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if (
            not wanted()
            or settings.current().compiled_picks != "all"  # library, off: Triton kernels stay in nodes
            or not getattr(torch._functorch.config, "decompose_custom_triton_ops", True)
            or on_cpu(args, kwargs)  # Inductor compiles no Triton kernel for CPU tensors
        ):
            return mode.__torch_dispatch__(op, types, args, kwargs)
        try:
            with mode, handling_launches(_through_wrap_triton):
                return fn(*args, **kwargs)
        except NotTraceable as error:  # this call launched otherwise than the recorded one
            log.debug("the compiled graph keeps the operator %s: %s", op, error)
            return mode.__torch_dispatch__(op, types, args, kwargs)

    return functional


def _through_wrap_triton(launch: Launch, original: Callable[[], Any] | None) -> Any:
    """Trace one launch as `torch.library.wrap_triton`'s; launch options under a one-config
    `triton.autotune`, as Dynamo wraps a launch given them.

    Raises:
        NotTraceable: the kernel is not a `triton.jit` function or a `triton.autotune` of one.
    """
    import triton
    from triton.runtime.autotuner import Autotuner

    kernel = launch.kernel
    if not isinstance(kernel, (triton.runtime.jit.JITFunction, Autotuner)):
        raise NotTraceable(f"`{kernel_name(kernel)}` is a {type(kernel).__name__}, not a triton.jit kernel")
    options = {name: value for name, value in launch.kwargs.items() if name in _OPTIONS}
    arguments = {name: value for name, value in launch.kwargs.items() if name not in _OPTIONS}
    if options and isinstance(kernel, Autotuner):
        raise NotTraceable(f"`{kernel_name(kernel)}` is tuned and given launch options besides")
    with suspended():  # should the wrapper run the kernel, it launches as usual
        return wrap_triton_launch(kernel, launch.grid, launch.args, arguments, options)
