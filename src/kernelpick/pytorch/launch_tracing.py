"""Run a user's function on fake tensors and note the launches it makes, launching nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import _disable_current_modes

from kernelpick.errors import OperatorError
from kernelpick.pytorch.hooks import Launch, handling_launches

#: The size given to a symbolic size that carries no hint (an unbacked size) when making fake inputs.
_UNHINTED_SIZE = 8


@dataclass(frozen=True, slots=True)
class Recording:
    """What one call made on fake tensors did.

    Attributes:
        inputs: the call's arguments by parameter name, as the fake tensors it ran on.
        launches: every kernel launch, in order (none of them ran).
        output: what the function returned (fake tensors).
        versions: each input tensor's version counter before the call, by parameter name; a later
            value shows the function wrote it with a PyTorch in-place operation.
    """

    inputs: dict[str, Any]
    launches: tuple[Launch, ...]
    output: Any
    versions: dict[str, tuple[int, ...]]

    def written_by_torch(self) -> tuple[str, ...]:
        """Inputs whose version counter moved: written by a PyTorch operation inside the function."""
        return tuple(
            name for name, before in self.versions.items() if versions_of(self.inputs[name]) != before
        )


@contextmanager
def recording() -> Iterator[list[Launch]]:
    """Within the block, this thread's launches are appended to the yielded list instead of running."""
    launches: list[Launch] = []

    def note(launch: Launch, original: Callable[[], Any] | None) -> None:
        launches.append(launch)

    with handling_launches(note):
        yield launches


@contextmanager
def isolated() -> Iterator[None]:
    """Step outside every active tracer: dispatch modes (fake, proxy, functional) and functorch transforms."""
    from torch._functorch.pyfunctorch import temporarily_clear_interpreter_stack

    with contextlib.ExitStack() as stack:
        stack.enter_context(_disable_current_modes())
        stack.enter_context(temporarily_clear_interpreter_stack())
        yield


def record_call(
    fn: Callable[..., Any], arguments: Mapping[str, Any], positional: tuple[str, ...]
) -> Recording:
    """Call `fn` once on fake copies of `arguments`, with launches recorded instead of run.

    Args:
        fn: the user's function.
        arguments: its arguments by parameter name (real, fake, functional or traced tensors alike).
        positional: the names passed by position, in order; the rest go by keyword.

    Raises:
        OperatorError: the function failed on fake tensors; the message says what it raised.
    """
    # Not under torch.no_grad(): torch.export records a grad-mode change as a node of the exported
    # graph (an empty `wrap_with_set_grad_enabled`, which then fails to load). The fake copies are
    # detached instead, so the call builds no autograd graph and may write its inputs in place.
    with isolated():
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        converted: dict[int, Any] = {}
        inputs = {name: _fake_copy(value, mode, converted) for name, value in arguments.items()}
        versions = {name: versions_of(value) for name, value in inputs.items() if versions_of(value)}
        args = tuple(inputs[name] for name in positional)
        kwargs = {name: value for name, value in inputs.items() if name not in positional}
        with mode, recording() as launches:
            try:
                output = fn(*args, **kwargs)
            except OperatorError:
                raise
            except Exception as error:
                raise OperatorError(
                    f"`{getattr(fn, '__qualname__', fn)}` failed when run on fake tensors to find what its kernels "
                    f"write ({type(error).__name__}: {error}); a function registered as an operator must run "
                    "on tensors without data (no .item(), .tolist(), .numpy() or data_ptr() on inputs). "
                    "Pass mutates_args explicitly and register a fake implementation with @op.register_fake"
                ) from error
    return Recording(inputs, tuple(launches), output, versions)


def versions_of(value: Any) -> tuple[int, ...]:
    """The version counters of the tensors in `value` (a tensor or a list of tensors)."""
    if isinstance(value, torch.Tensor):
        return (value._version,)
    if isinstance(value, (list, tuple)):
        return tuple(v._version for v in value if isinstance(v, torch.Tensor))
    return ()


def _fake_copy(value: Any, mode: FakeTensorMode, converted: dict[int, Any]) -> Any:
    if isinstance(value, torch.Tensor):
        found = converted.get(id(value))
        if found is None:
            found = converted[id(value)] = _fake_tensor(value, mode).detach()
        return found
    if isinstance(value, (list, tuple)):
        return type(value)(_fake_copy(v, mode, converted) for v in value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return concrete(value)
    return value


def _fake_tensor(tensor: torch.Tensor, mode: FakeTensorMode) -> torch.Tensor:
    """A fake tensor with `tensor`'s dtype, device, sizes and strides (symbolic sizes at their hints)."""
    if type(tensor) is torch.Tensor and not torch._is_functional_tensor(tensor) and not tensor.is_meta:
        try:
            return mode.from_tensor(tensor)
        except Exception:  # a wrapped tensor the converter does not take: rebuild from its metadata
            pass
    sizes = [concrete(s) for s in tensor.shape]
    strides = [concrete(s) for s in tensor.stride()]
    with mode:
        return torch.empty_strided(sizes, strides, dtype=tensor.dtype, device=tensor.device)


def concrete(value: Any) -> Any:
    """A plain Python number for a symbolic one: its hint, without adding a guard."""
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value
    node = value.node
    hint = getattr(node, "hint", None)
    if hint is None:
        try:
            hint = node.shape_env.size_hint(node.expr, allow_none=True)
        except Exception:  # no shape environment, or an expression it cannot evaluate
            hint = None
    if hint is None:
        return _UNHINTED_SIZE if isinstance(value, torch.SymInt) else 0
    kind = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)]
    return kind(hint)
