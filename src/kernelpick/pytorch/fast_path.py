"""Whether an eager call may skip PyTorch's dispatcher: plain tensors, no autograd, a Triton device."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

#: The call must go through PyTorch's dispatcher (a subclass, autograd, a device kernelpick cannot launch on).
DISPATCH = 0
#: The function may run directly: every tensor is a plain CUDA tensor.
DIRECT = 1
#: The function may run directly, with launches on CPU tensors sent to Triton's interpreter.
INTERPRET = 2

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter


def route(args: tuple[Any, ...], kwargs: dict[str, Any], grad_enabled: bool) -> int:
    """How an eager call with these arguments may run: `DISPATCH`, `DIRECT` or `INTERPRET`."""
    how = _route(args, grad_enabled)
    if kwargs and how != DISPATCH:
        other = _route(kwargs.values(), grad_enabled)
        how = DISPATCH if other == DISPATCH else max(how, other)
    return how


def _route(values: Iterable[Any], grad_enabled: bool) -> int:
    how = DIRECT
    for value in values:
        kind = type(value)
        if kind is _Tensor or kind is _Parameter:
            if grad_enabled and value.requires_grad:
                return DISPATCH
            if not value.is_cuda:
                if not value.is_cpu:
                    return DISPATCH
                how = INTERPRET
        elif kind is list or kind is tuple:
            inner = _route(value, grad_enabled)
            if inner == DISPATCH:
                return DISPATCH
            how = max(how, inner)
        elif isinstance(value, _Tensor):  # a subclass: FakeTensor, FunctionalTensor, DTensor, ...
            return DISPATCH
    return how
