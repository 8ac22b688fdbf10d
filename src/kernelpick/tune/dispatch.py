"""The hot path of a tuned kernel: from a call's arguments to what to launch, in well under a microsecond.

Two keys identify a call. The *exact* key (the tuning key's values, every tensor's dtype, the device)
is computed generically and decides what gets tuned. The *fast* key is computed by a function
generated for the shape of the first call (which positions hold tensors, which names come by
keyword), so that a steady stream of same-shaped calls costs a few indexing operations and one
dictionary lookup. A call of another shape misses the fast table and takes the exact path: slower,
never wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

FastKey = Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]


def exact_key(
    args: tuple[Any, ...], kwargs: dict[str, Any], key_positions: Sequence[tuple[int, str]]
) -> tuple[Any, ...]:
    """Key values, then the dtype of every tensor argument, then the device of the first tensor."""
    count = len(args)
    key = [args[i] if i < count else kwargs.get(name) for i, name in key_positions]
    device = None
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            key.append(value.dtype)
            if device is None:
                device = value.device
    key.append(device)
    return tuple(key)


def call_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What the generated fast key assumes about a call: its arity, keyword names and tensor slots."""
    tensors = tuple(i for i, value in enumerate(args) if isinstance(value, torch.Tensor))
    tensor_kwargs = tuple(name for name, value in kwargs.items() if isinstance(value, torch.Tensor))
    return len(args), tuple(kwargs), tensors, tensor_kwargs


def generate_fast_key(shape: tuple[Any, ...], key_positions: Sequence[tuple[int, str]]) -> FastKey | None:
    """Source-generate a key function for calls of `shape` (None when there is no tensor to key on)."""
    count, names, tensors, tensor_kwargs = shape
    slots = [f"a[{i}]" for i in tensors] + [f"k[{name!r}]" for name in tensor_kwargs]
    if not slots:
        return None
    values = [f"a[{i}]" if i < count else f"k.get({name!r})" for i, name in key_positions]
    # Arity and keyword names make a call of another shape miss instead of match.
    structure = ["len(a)", "tuple(k)" if names else "len(k)"]
    parts = [*values, *(f"{s}.dtype" for s in slots), f"{slots[0]}.device", *structure]
    source = f"def fast_key(a, k):\n    return ({', '.join(parts)},)\n"
    namespace: dict[str, Any] = {}
    exec(
        compile(source, "<kernelpick fast key>", "exec"), namespace
    )  # our own generated source, no user data
    function: FastKey = namespace["fast_key"]
    return function


def _no_fast_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    raise LookupError("no fast key yet")


class Dispatcher:
    """Maps calls to launch entries: exact keys for correctness, a generated fast key for speed."""

    def __init__(self, key_positions: Sequence[tuple[int, str]]) -> None:
        self.key_positions = list(key_positions)
        self.entries: dict[tuple[Any, ...], Any] = {}
        self.fast: dict[tuple[Any, ...], Any] = {}
        self.fast_key: FastKey = _no_fast_key
        self._shape: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    def lookup(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The entry for this call, or None. The fast path: one generated function, one dict lookup."""
        try:
            return self.fast[self.fast_key(args, kwargs)]
        except (LookupError, AttributeError, TypeError):
            return None

    def exact(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        return exact_key(args, kwargs, self.key_positions)

    def remember(self, args: tuple[Any, ...], kwargs: dict[str, Any], entry: Any) -> None:
        """Make later calls shaped like this one find `entry` through the fast path."""
        shape = call_shape(args, kwargs)
        with self._lock:
            if self._shape is None:
                fast_key = generate_fast_key(shape, self.key_positions)
                if fast_key is None:
                    return
                self._shape, self.fast_key = shape, fast_key
            if shape == self._shape:
                self.fast[self.fast_key(args, kwargs)] = entry


def describe_key(names: Sequence[str], key: tuple[Any, ...], *, dtypes: bool = False) -> str:
    """A key for people: "(M=128, N=4096)"; with `dtypes`, the tensor dtypes that are part of the key follow."""
    named = [f"{n}={v}" for n, v in zip(names, key)]
    if dtypes:
        named.append("dtypes " + "/".join(str(v).removeprefix("torch.") for v in key[len(names) : -1]))
    return "(" + ", ".join(named) + ")"
