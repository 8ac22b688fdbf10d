"""Input signatures: what selects a tuning (device, dtypes, sizes, strides, offsets, alignment, user key)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch

from kernelpick.device import DeviceInfo, describe, device_of
from kernelpick.errors import ArgumentError, ConfigError, describe_value
from kernelpick.tensors import TensorSpec

_Tensor = torch.Tensor


def value_key(value: Any) -> Any:
    """What of one argument selects a tuning: a tensor's metadata, any other value itself. A tensor's
    includes whether its data's address is a multiple of 16 bytes, which Triton compiles for (from the
    address itself: a misaligned storage is told apart from an aligned one at the same offset)."""
    if isinstance(value, _Tensor):
        try:
            aligned = not value.data_ptr() & 15
        except RuntimeError:  # a tensor without data (one day a fake tensor): `check_measurable` says so
            aligned = True
        return (value.dtype, value.shape, value.stride(), value.storage_offset(), aligned, value.device)
    return value


def _any_key(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple([value_key(x) for x in inputs])


def _tensors_key(count: int) -> tuple[list[str], str, str]:
    """For generated code of `count` inputs: their names (x0, x1, ...), the test that all are plain
    tensors, and the expression of their key."""
    names = [f"x{i}" for i in range(count)]
    plain = " and ".join(f"type({x}) is Tensor" for x in names)
    fields = ", ".join(
        f"{x}.dtype, {x}.shape, {x}.stride(), {x}.storage_offset(), not {x}.data_ptr() & 15, {x}.device"
        for x in names
    )
    return names, plain, f"({fields},)"


def _tensor_keyer(count: int) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A key function for `count` plain tensors: one flat tuple, no loop (other inputs: `_any_key`)."""
    names, plain, key = _tensors_key(count)
    source = (
        f"def key(inputs):\n"
        f"    {', '.join(names)}, = inputs\n"
        f"    if {plain}:\n"
        f"        return {key}\n"
        f"    return any_key(inputs)\n"
    )
    scope: dict[str, Any] = {"Tensor": _Tensor, "any_key": _any_key}
    exec(compile(source, f"<kernelpick signature key of {count} tensors>", "exec"), scope)
    return cast("Callable[[tuple[Any, ...]], tuple[Any, ...]]", scope["key"])


#: `POSITIONAL_KEYS[n](inputs)`: the key of `n` positional inputs (shared with the selector's hot path).
POSITIONAL_KEYS = [_any_key] + [_tensor_keyer(count) for count in range(1, 9)]


#: Most keys of plain tensors whose guards a selector's positional hot path keeps (`Calls.front`).
FRONT = 64


class Calls(dict[tuple[Any, ...], Callable[..., Any]]):
    """A selector's bound calls by signature key, and `front`: for keys of plain tensors already
    called, the same calls keyed by three integers a tensor (element count, offset, address modulo
    16), each with Dynamo's guard of the rest of the key (one C++ call), which the positional hot
    path tries before making a key, which costs more. Any change of a call empties the front, so a
    guard never outlives its call.
    """

    def __init__(self) -> None:
        super().__init__()
        self.front: dict[tuple[Any, ...], tuple[Callable[..., bool], Callable[..., Any]]] = {}
        self._lock = threading.Lock()

    def __setitem__(self, key: tuple[Any, ...], call: Callable[..., Any]) -> None:
        with self._lock:
            super().__setitem__(key, call)
            self.front.clear()

    def clear(self) -> None:
        with self._lock:
            super().clear()
            self.front.clear()

    def remember(
        self, key: tuple[Any, ...], call: Callable[..., Any], places: tuple[Any, ...], *tensors: torch.Tensor
    ) -> None:
        """Put `call` in front for plain `tensors` (of key `key` and `places`) if there is room, none
        is there for those places yet, `key` still maps to `call` and no tensor requires grad (the
        guard checks that, so a call the front answers needs no gradient)."""
        if _GUARDS is None or len(self.front) >= FRONT or any(t.requires_grad for t in tensors):
            return
        check = _guard(tensors)
        with self._lock:
            if self.get(key) is call and len(self.front) < FRONT:
                self.front.setdefault(places, (check, call))

    def __reduce__(self) -> Any:  # copied and pickled without its lock and guards
        return (Calls, (), None, None, iter(dict(self).items()))


def _guard(tensors: Sequence[torch.Tensor]) -> Callable[..., bool]:
    """A check that inputs have the dtypes, devices, sizes and strides of `tensors` (and require grad
    as they do). Dynamo's guard refuses one tensor passed twice (`scaled_mm(a, b, one, one)`): it is
    given each tensor once, behind a check that the same ones repeat."""
    firsts = {id(t): i for i, t in reversed(list(enumerate(tensors)))}
    distinct = sorted(firsts.values())
    check: Callable[..., bool] = _GUARDS(
        *[tensors[i] for i in distinct],
        dynamic_dims_sizes=[list(tensors[i].shape) for i in distinct],
        dynamic_dims_strides=[list(tensors[i].stride()) for i in distinct],
    ).check
    if len(distinct) == len(tensors):
        return check
    repeats = tuple((i, firsts[id(t)]) for i, t in enumerate(tensors) if firsts[id(t)] != i)
    return _repeating(len(tensors), repeats)(check)


@functools.cache
def _repeating(count: int, repeats: tuple[tuple[int, int], ...]) -> Callable[..., Callable[..., bool]]:
    """`make(check)`: a check of `count` inputs, input i the same as input j for each (i, j) of
    `repeats` and `check` of the others, written out, not looped (docs/benchmarks.md: what a loop cost)."""
    names = [f"x{i}" for i in range(count)]
    same = " and ".join(f"x{i} is x{j}" for i, j in repeats)
    others = ", ".join(name for i, name in enumerate(names) if i not in dict(repeats))
    source = (
        "def make(check):\n"
        f"    def check_repeating({', '.join(names)}):\n"
        f"        return {same} and check({others})\n"
        "    return check_repeating\n"
    )
    scope: dict[str, Any] = {}
    exec(compile(source, f"<kernelpick guard of {count} inputs, some repeated>", "exec"), scope)
    return cast("Callable[..., Callable[..., bool]]", scope["make"])


_GUARDS: Any  # what Dynamo checks a compiled frame's tensors with (sizes and strides given: static)
try:
    from torch._C._dynamo import guards as _dynamo_guards

    _GUARDS = _dynamo_guards.TensorGuards
except ImportError:  # pragma: no cover - a torch without Dynamo: every call makes its key
    _GUARDS = None


@functools.cache
def positional_caller(count: int) -> Callable[..., Callable[..., Any]]:
    """`make(calls, slow, differentiable=None)`: a selector's hot path of `count` positional inputs: what
    `calls` holds for their key (`calls.front` first) where all are plain tensors, `slow(...)` for the
    rest. Inputs that need gradients go to `differentiable`, when given; tested only where the front
    does not answer, as it holds no such inputs (`Calls.remember`)."""
    names, plain, key = _tensors_key(count)
    inputs = ", ".join(names)
    places = ", ".join(f"{x}.numel(), {x}.storage_offset(), {x}.data_ptr() & 15" for x in names)
    needs_grad = f"differentiable is not None and grad_enabled() and any_requires_grad({inputs})"
    source = (
        "def make(calls, slow, differentiable=None):\n"
        "    in_front, get, remember = calls.front.get, calls.get, calls.remember\n"
        f"    def call({inputs}):\n"
        f"        if {plain}:\n"
        "            try:\n"
        f"                places = ({places},)\n"
        "            except RuntimeError:  # a tensor without storage (one a functorch transform wraps)\n"
        "                places = None\n"
        "            front = in_front(places)\n"
        "            if front is not None:\n"
        f"                if front[0]({inputs}):\n"
        f"                    return front[1]({inputs})\n"
        f"            if {needs_grad}:\n"
        f"                return differentiable({inputs})\n"
        f"            key = {key}\n"
        "            found = get(key)\n"
        "            if found is not None:\n"
        "                if front is None:\n"
        f"                    remember(key, found, places, {inputs})\n"
        f"                return found({inputs})\n"
        f"        elif {needs_grad}:\n"
        f"            return differentiable({inputs})\n"
        f"        return slow({inputs})\n"
        "    return call\n"
    )
    scope: dict[str, Any] = {
        "Tensor": _Tensor,
        "grad_enabled": torch._C.is_grad_enabled,
        "any_requires_grad": torch._C._any_requires_grad,
    }
    exec(compile(source, f"<kernelpick hot path of {count} tensors>", "exec"), scope)
    return cast("Callable[..., Callable[..., Any]]", scope["make"])


def signature_key(
    inputs: tuple[Any, ...], kwargs: Mapping[str, Any], key: Callable[..., Any] | None
) -> tuple[Any, ...]:
    """The dictionary key of one call: two calls share one exactly when they share a `Signature`, but
    the key is faster to make (for up to eight plain tensors one flat tuple, made without a loop)."""
    parts = POSITIONAL_KEYS[len(inputs)](inputs) if len(inputs) < 9 else _any_key(inputs)
    if kwargs:
        parts = (parts, tuple([(name, value_key(kwargs[name])) for name in sorted(kwargs)]))
    if key is not None:
        parts = (parts, key(*inputs, **kwargs))
    return parts


def checked_signature_key(
    selector: str, inputs: tuple[Any, ...], kwargs: Mapping[str, Any], key: Callable[..., Any] | None
) -> tuple[Any, ...]:
    """`signature_key`, checked to be hashable (off the hot path, which finds out by using it).

    Raises:
        ArgumentError: an input (or what `key` returned) cannot be hashed; `unhashable_inputs` says which.
    """
    parts = signature_key(inputs, kwargs, key)
    try:
        hash(parts)
    except TypeError:
        raise ArgumentError(unhashable_inputs(selector, inputs, kwargs)) from None
    return parts


def unhashable_inputs(selector: str, inputs: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The message for a call whose signature cannot be a dictionary key: which inputs, by position or
    keyword, and their types (or the selector's `key` function, when every input can be hashed)."""
    bad = [f"input {i} is a {type(v).__name__}" for i, v in enumerate(inputs) if not _hashable(v)]
    bad += [f"keyword argument `{k}` is a {type(v).__name__}" for k, v in kwargs.items() if not _hashable(v)]
    if not bad:
        return (
            f"the `key` function of selector `{selector}` returned a value that cannot be hashed: "
            "return numbers, strings or tuples of them"
        )
    return (
        f"{' and '.join(bad)} in a call of selector `{selector}`: a selector tunes once per value of "
        "each argument that is not a tensor, which must be hashable (numbers, strings, None, dtypes, "
        "tuples of these); pass a tuple, or leave the value out of the call"
    )


def holds_tensor(value: Any) -> bool:
    """Whether `value` is a tensor or a tuple holding one (at any depth): in a key it would stand for
    itself, by its identity, so that every call made a new key."""
    return isinstance(value, _Tensor) or (isinstance(value, tuple) and any(map(holds_tensor, value)))


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def check_measurable(selector: str, inputs: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse a meta or fake tensor among a selector's inputs (choices are measured on tensors with
    data), and tensors inside a tuple (a key holds a tensor only as an argument of its own).

    Raises:
        ArgumentError: the message names the input and describes it.
    """
    from torch._subclasses.fake_tensor import is_fake

    named = [(f"input {i}", v) for i, v in enumerate(inputs)]
    named += [(f"keyword argument `{k}`", v) for k, v in kwargs.items()]
    for where, value in named:
        if isinstance(value, tuple) and holds_tensor(value):
            raise ArgumentError(
                f"{where} of selector `{selector}` is a tuple holding tensors: a selector keys a tensor by "
                "its dtype, sizes and strides only where it is an argument of its own (in a tuple, every "
                "call would be a new signature, tuned again); pass the tensors as separate arguments"
            )
        if isinstance(value, _Tensor) and value.device.type == "meta":
            raise ArgumentError(
                f"{where} of selector `{selector}` is a meta tensor ({describe_value(value)}): a "
                "selector measures its choices on tensors with data; pass tensors on a GPU or the CPU"
            )
        if isinstance(value, _Tensor) and is_fake(value):
            raise ArgumentError(
                f"{where} of selector `{selector}` is a fake tensor ({describe_value(value)}), as "
                "torch.compile, torch.export and FakeTensorMode trace with: a selector measures its "
                "choices on tensors with data; in a traced program call it as an operator, "
                f"selector.as_op('namespace::{selector.replace('.', '_')}'), which selects when the "
                "program runs"
            )


@dataclass(frozen=True, slots=True)
class Signature:
    """One input signature of a selector: the tuning problem its calls with these inputs share. Tensors
    become their `TensorSpec`; `user_key` is what the selector's `key` function returned (or None)."""

    inputs: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    user_key: Any
    device: DeviceInfo

    @classmethod
    def of(
        cls, inputs: Sequence[Any], kwargs: Mapping[str, Any], key: Callable[..., Any] | None = None
    ) -> Signature:
        def spec(value: Any) -> Any:
            return TensorSpec.of(value) if isinstance(value, torch.Tensor) else value

        user_key = None if key is None else key(*inputs, **kwargs)
        if holds_tensor(user_key):
            raise ArgumentError(
                f"a selector's `key` function returned {describe_value(user_key)}: a key holds a tensor by "
                "its identity, so every call would be a new signature, tuned again; return numbers, "
                "strings or tuples of them (a tensor's shape, dtype or .item())"
            )
        devices = {v.device for v in (*inputs, *kwargs.values()) if isinstance(v, torch.Tensor)}
        if len(devices) > 1:
            raise ConfigError(
                f"the inputs are on several devices ({', '.join(sorted(map(str, devices)))}); "
                "a selector call takes tensors on one device: move them to one"
            )
        return cls(
            inputs=tuple(spec(v) for v in inputs),
            kwargs=tuple((name, spec(kwargs[name])) for name in sorted(kwargs)),
            user_key=user_key,
            device=describe(device_of([*inputs, *kwargs.values()])),
        )

    @property
    def named_kwargs(self) -> dict[str, Any]:
        return dict(self.kwargs)

    def tensor(self, index: int) -> TensorSpec:
        """The spec of positional input `index`.

        Raises:
            ConfigError: that input is not a tensor.
        """
        value = self.inputs[index]
        if not isinstance(value, TensorSpec):
            raise ConfigError(f"input {index} is a {type(value).__name__}, expected a tensor")
        return value

    def to_data(self) -> list[Any]:
        """Plain data naming every field that selects a tuning, for the store key."""

        def plain(value: Any) -> Any:
            if isinstance(value, TensorSpec):
                return value.to_data()
            if isinstance(value, (torch.dtype, torch.device)):
                return str(value)
            if value is None or isinstance(value, (bool, int, float, str)):
                return value
            if isinstance(value, (tuple, list)):
                return [plain(v) for v in value]
            return f"{type(value).__qualname__}:{value!r}"

        return [
            [plain(v) for v in self.inputs],
            [[name, plain(v)] for name, v in self.kwargs],
            plain(self.user_key),
        ]

    def __str__(self) -> str:
        parts = [str(v) if isinstance(v, TensorSpec) else repr(v) for v in self.inputs]
        parts += [f"{name}={v if isinstance(v, TensorSpec) else repr(v)}" for name, v in self.kwargs]
        if self.user_key is not None:
            parts.append(f"key={self.user_key!r}")
        return "(" + ", ".join(parts) + ")"
