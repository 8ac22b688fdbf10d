"""The hot path of a tuned kernel: from a call's arguments to what to launch."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import torch

from kernelpick.tensors import is_descriptor

FastKey = Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]
#: What a tuned call launches: the config as the user gave it (what `best_config` shows), the function
#: to run (Triton's `run`, or the interpreter's) and the config's launch keyword arguments as a plain
#: dict (the fastest to unpack).
Entry = tuple[Any, Callable[..., Any], dict[str, Any]]
#: An argument Triton specializes on: its position, its name, and whether on alignment (divisibility by 16).
Specialized = tuple[int, str, bool]
#: What the fast path's lookup may raise for a call of another shape: it then takes the exact path.
MISSES = (LookupError, AttributeError, TypeError, RuntimeError)


def specialized_arguments(params: Iterable[Any], keyed: Collection[str]) -> list[Specialized]:
    """The arguments of a kernel (Triton's `JITFunction.params`) whose specialization is not in the key yet:
    constexprs and the `keyed` arguments are in it by value; `do_not_specialize` ones are not specialized."""
    return [
        (p.num, p.name, not p.do_not_specialize_on_alignment)
        for p in params
        if not p.is_constexpr and not p.do_not_specialize and p.name not in keyed
    ]


def specialization_mark(value: Any, align: bool = True) -> str:
    """How Triton specializes one argument: "D" (an address or integer divisible by 16), "1" (the integer 1),
    "-" (neither), "." (not a pointer or an integer)."""
    if isinstance(value, torch.Tensor):
        try:
            return "D" if align and value.data_ptr() % 16 == 0 else "-"
        except RuntimeError:  # a tensor without storage (fake, functional): no address to align
            return "."
    if isinstance(value, int):  # bool too, as the fast key sees it
        return "1" if value == 1 else "D" if align and value % 16 == 0 else "-"
    return "."


class DescriptorKey(NamedTuple):
    """A tensor descriptor in an exact key: its tensor's dtype and its block shape (None: not keyed)."""

    dtype: torch.dtype
    block_shape: tuple[int, ...] | None

    def __str__(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        blocks = "" if self.block_shape is None else str(list(self.block_shape))
        return f"descriptor<{dtype}{blocks}>"


def exact_key(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key_positions: Sequence[tuple[int, str]],
    specialized: Sequence[Specialized] = (),
    blocks: bool = True,
) -> tuple[Any, ...]:
    """Key values, the dtype of every tensor argument (a `DescriptorKey` for a tensor descriptor, with
    its block shape if `blocks`), the specialization (for people too: "x_ptr:D y_ptr:- n:1", the
    arguments `specialization_mark` marks "." left out), the device of the first tensor."""
    count = len(args)
    key = [args[i] if i < count else kwargs.get(name) for i, name in key_positions]
    device = None
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            key.append(value.dtype)
        elif is_descriptor(value):
            key.append(DescriptorKey(value.base.dtype, tuple(value.block_shape) if blocks else None))
            value = value.base
        else:
            continue
        if device is None:
            device = value.device
    marks = [
        (name, specialization_mark(args[i] if i < count else kwargs.get(name), align))
        for i, name, align in specialized
    ]
    # Named, so leaving out what Triton does not specialize is unambiguous.
    key.append(" ".join(f"{name}:{mark}" for name, mark in marks if mark != "."))
    key.append(device)
    return tuple(key)


def _kind(value: Any) -> str:
    """What the fast key assumes of a slot: "t" (tensor), "i" (integer), "d" (descriptor), "" (other)."""
    if isinstance(value, torch.Tensor):
        return "t"
    return "i" if isinstance(value, int) else "d" if is_descriptor(value) else ""


def call_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What the generated fast key assumes of a call: the kind of each argument (a keyword one by name)."""
    return tuple(map(_kind, args)), tuple((name, _kind(value)) for name, value in kwargs.items())


def _slots(shape: tuple[Any, ...], kind: str) -> list[str]:
    """The fast key's expressions of the arguments of `kind` in calls of `shape`."""
    kinds, keyword_kinds = shape
    found = [f"a[{i}]" for i, own in enumerate(kinds) if own == kind]
    return found + [f"k[{name!r}]" for name, own in keyword_kinds if own == kind]


def generate_fast_key(
    shape: tuple[Any, ...],
    key_positions: Sequence[tuple[int, str]],
    specialized: Sequence[Specialized] = (),
    blocks: bool = True,
) -> FastKey | None:
    """Source-generate a key function for calls of `shape` (None when there is no tensor or tensor
    descriptor to key on); `blocks`: descriptors' block shapes are keyed."""
    kinds, names = shape
    count, named = len(kinds), dict(names)
    slots, described = _slots(shape, "t"), _slots(shape, "d")
    if not slots and not described:
        return None
    values = [f"a[{i}]" if i < count else f"k.get({name!r})" for i, name in key_positions]
    # Terms that tell apart every pair of calls of `shape` that `exact_key` specializes apart. Each
    # raises for a value of another kind than the shape's (a miss, then the exact path): `.data_ptr()`
    # for a non-tensor, `& 15` and `| 0` for a non-integer; `type()` pins the rest. A tensor's
    # `data_ptr()` is most of the cost: Triton reads it too.
    terms = []
    for i, name, align in specialized:
        slot = f"a[{i}]" if i < count else f"k[{name!r}]"
        kind = kinds[i] if i < count else named.get(name, "")
        if kind == "t":
            if align:  # a tensor slot's dtype, in the key already, raises for a non-tensor
                terms.append(f"not {slot}.data_ptr() & 15")
        elif kind == "i":
            # 0: divisible by 16, 2: equal to 1, 1: neither (one term, the cheapest we found)
            terms.append(f"{slot} & 15 and 1 + ({slot} == 1)" if align else f"({slot} | 0) == 1")
        else:
            terms.append(f"type({slot})" if i < count else f"type(k.get({name!r}))")
    # Arity and keyword names make a call of another shape miss instead of match.
    structure = ["len(a)", "tuple(k)" if names else "len(k)"]
    # A tensor in a descriptor's slot has no `.base`: a miss. A block shape is a list: keyed as a tuple.
    descriptor_terms = [f"{d}.base.dtype" for d in described]
    if blocks:
        descriptor_terms += [f"tuple({d}.block_shape)" for d in described]
    parts = [
        *values,
        *(f"{s}.dtype" for s in slots),
        *descriptor_terms,
        *terms,
        f"{slots[0]}.device" if slots else f"{described[0]}.base.device",
        *structure,
    ]
    source = f"def fast_key(a, k, type=type):\n    return ({', '.join(parts)},)\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<kernelpick fast key>", "exec"), namespace)  # our own source, no user data
    return cast("FastKey", namespace["fast_key"])


def _no_fast_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    raise LookupError("no fast key yet")


@dataclass(eq=False, repr=False)
class Dispatcher:
    """Maps calls to launch entries: exact keys for correctness, a generated fast key for speed."""

    key_positions: Sequence[tuple[int, str]]
    specialized: Sequence[Specialized] = ()
    blocks: bool = True  # descriptors' block shapes are keyed (no pre-hook sets them)
    entries: dict[tuple[Any, ...], Any] = field(default_factory=dict, init=False)
    fast: dict[tuple[Any, ...], Any] = field(default_factory=dict, init=False)
    fast_key: FastKey = field(default_factory=lambda: _no_fast_key, init=False)
    _shape: tuple[Any, ...] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def clear(self) -> None:
        """Forget every entry: the next call of each key takes the exact path and tunes again."""
        with self._lock:
            self.entries.clear()
            self.fast.clear()

    def swap(self, key: tuple[Any, ...], old: Any, new: Any) -> None:
        """Put `new` where `old` (that very object) is the entry of exact key `key`, in both tables
        (None: forget it)."""
        with self._lock:
            if self.entries.get(key) is old:
                del self.entries[key]
                if new is not None:
                    self.entries[key] = new
            for fast in [fast for fast, entry in self.fast.items() if entry is old]:
                del self.fast[fast]
                if new is not None:
                    self.fast[fast] = new

    def exact(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        return exact_key(args, kwargs, self.key_positions, self.specialized, self.blocks)

    def remember(self, args: tuple[Any, ...], kwargs: dict[str, Any], entry: Any) -> None:
        """Make later calls shaped like this one find `entry` through the fast path."""
        shape = call_shape(args, kwargs)
        with self._lock:
            if self._shape is None:
                fast_key = generate_fast_key(shape, self.key_positions, self.specialized, self.blocks)
                if fast_key is None:
                    return
                self._shape, self.fast_key = shape, fast_key
            if shape == self._shape:
                # A miss (a tensor without storage, say): such calls take the exact path.
                with contextlib.suppress(*MISSES):
                    self.fast[self.fast_key(args, kwargs)] = entry


def describe_key(names: Sequence[str], key: tuple[Any, ...], *, dtypes: bool = False) -> str:
    """A key for people: "(M=128, N=4096)"; with `dtypes`, the tensor dtypes and the specialization
    (`exact_key`) that are part of the key follow."""
    named = [f"{n}={v}" for n, v in zip(names, key)]
    if dtypes:
        rest = key[len(names) : -1]
        named.append(
            "dtypes " + "/".join(str(v).removeprefix("torch.") for v in rest if not isinstance(v, str))
        )
        named += [f"specialized {v}" for v in rest if isinstance(v, str) and v]  # all of it: a key
    return "(" + ", ".join(named) + ")"
