"""The `triton.jit` function inside autotuning and heuristics wrappers, with the arguments they add."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernelpick.config import OPTION_DEFAULTS
from kernelpick.errors import AnalysisError, describe_value
from kernelpick.tensors import holds_descriptor, is_descriptor, own_descriptors

#: How deep wrappers may nest before the object is taken to be malformed (a wrapper of itself).
_MAX_DEPTH = 32
#: What a stack of wrappers holds at its bottom: a `triton.jit` function, compilable or interpreted
#: (decorated while TRITON_INTERPRET=1 was set).
KERNELS = (JITFunction, InterpretedFunction)


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """A kernel (the `triton.jit` function, or an `InterpretedFunction` under TRITON_INTERPRET) with the
    launch arguments its wrappers would pass it: `kwargs` adds config meta-parameters and heuristic
    values; `problem` says why they could not be completed (a heuristic raised), else empty."""

    kernel: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    problem: str = ""


def _config_kwargs(config: Any) -> dict[str, Any]:
    """A config's meta-parameters and compile options (Triton's `Config` or anything shaped like it)."""
    kwargs = dict(getattr(config, "kwargs", None) or {})
    for option in OPTION_DEFAULTS:
        value = getattr(config, option, None)
        if value is not None:
            kwargs[option] = value
    return kwargs


def innermost(kernel: Any) -> Any:
    """The object at the bottom of a stack of wrappers (each exposing `.fn`)."""
    for _ in range(_MAX_DEPTH):
        if isinstance(kernel, KERNELS) or not hasattr(kernel, "fn"):
            return kernel
        kernel = kernel.fn
    raise AnalysisError(
        f"wrappers of {describe_value(kernel)} nest more than {_MAX_DEPTH} deep; expected a @triton.jit function inside"
    )


def unwrap(kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Unwrapped:
    """Peel `triton.autotune`, `triton.heuristics` and look-alike wrappers off `kernel`, outermost first.

    An autotuner contributes its first config's meta-parameters and compile options (arguments
    given by the caller win) and what its `pre_hook` sets on tensor descriptors (`_hooked`); a
    heuristics wrapper computes its values from the arguments bound so far, as Triton does at launch.

    Raises:
        AnalysisError: `kernel` is not a Triton kernel or a wrapper of one.
    """
    bottom = innermost(kernel)
    if not isinstance(bottom, KERNELS):
        raise AnalysisError(
            f"expected a @triton.jit function or a triton.autotune / triton.heuristics wrapper of one, "
            f"got {type(kernel).__name__}: {describe_value(kernel)}"
        )
    arg_names = list(bottom.arg_names)  # a JITFunction's and an InterpretedFunction's alike
    current = dict(kwargs)
    while not isinstance(kernel, KERNELS):  # `innermost` found one within `_MAX_DEPTH`
        if isinstance(getattr(kernel, "values", None), Mapping):  # `triton.heuristics` or alike
            bound = {**dict(zip(arg_names, args, strict=False)), **current}
            for name, heuristic in kernel.values.items():
                try:
                    current[name] = heuristic(bound)
                except Exception as error:  # a user function; reported, not raised
                    problem = f"heuristic for `{name}` raised {type(error).__name__}: {error}"
                    return Unwrapped(bottom, tuple(args), current, problem)
                bound[name] = current[name]
        elif isinstance(getattr(kernel, "configs", None), Sequence):  # `triton.autotune` or alike
            if kernel.configs:
                for name, value in _config_kwargs(kernel.configs[0]).items():
                    current.setdefault(name, value)
                args, current = _hooked(kernel.configs[0], arg_names, args, current)
        kernel = kernel.fn
    return Unwrapped(bottom, tuple(args), current)


def _hooked(
    config: Any, arg_names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[Sequence[Any], dict[str, Any]]:
    """The arguments with `config`'s `pre_hook` run on copies of their tensor descriptors, where there
    are any: it sets their block shapes, and Triton runs it before compiling. It is handed meta tensors
    in place of every tensor, descriptors' bases included: the caller's tensors are never written."""
    hook = getattr(config, "pre_hook", None)
    if hook is None or not holds_descriptor([*args, *kwargs.values()]):
        return args, kwargs
    named = own_descriptors({**dict(zip(arg_names, args)), **kwargs})
    stand_ins = {name: _on_meta(value) for name, value in named.items()}
    hook({**stand_ins, **_config_kwargs(config)})
    for name, value in named.items():
        if is_descriptor(value):  # what the hook set, over the real tensor
            named[name] = replace(stand_ins[name], base=value.base)
    return [named[name] for name in arg_names[: len(args)]], {name: named[name] for name in kwargs}


def _on_meta(value: Any) -> Any:
    """A meta tensor shaped like `value`, or a copy of a descriptor over one; anything else as is."""
    if is_descriptor(value):
        return replace(value, base=_on_meta(value.base))
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value
