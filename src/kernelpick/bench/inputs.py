"""Benchmark arguments: scratch copies of what a run may write, and a selection's new example inputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

import torch

from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_generator, example_tensor, is_descriptor

InputGen = Callable[..., Sequence[Any]]


def tensor_of(value: Any) -> torch.Tensor | None:
    """The tensor an argument reads or writes: the tensor itself, or a tensor descriptor's base."""
    if isinstance(value, torch.Tensor):
        return value
    return cast("torch.Tensor", value.base) if is_descriptor(value) else None


def _storage_of(tensor: torch.Tensor) -> tuple[int, torch.device]:
    """What identifies the storage behind `tensor` (views of one storage share it)."""
    return tensor.untyped_storage().data_ptr(), tensor.device


class Example:
    """The arguments candidates run on, restorable to their first values: the tensors a run may write
    are replaced by scratch copies, the rest are passed as they are.

    What is restored and when is the front's knowledge, as data: a tuned kernel's copies (what its
    access analysis says it may write) are restored before every run; a selection's example inputs
    (`new_values`) only before the runs of a candidate whose first run wrote them (`changed`).

    Args:
        args, kwargs: the values (the call's own, or new ones).
        names: the arguments' names, in order, the positional ones first (none: their positions, "0",
            "1", ...): with the keywords, what `written`, `zeroed` and `read` name.
        written: the arguments a run may write (None: every tensor; (): none, nothing is copied).
        zeroed: the arguments to zero before each run instead of restoring (`reset_to_zero`).
        read: the arguments a run may read (None: all of them). A written storage that no read
            argument shares is copied once and never restored.
        restore_always: restore before every run, whatever the first run did.
    """

    def __init__(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        names: Sequence[str] = (),
        *,
        written: Collection[str] | None = None,
        zeroed: Collection[str] = (),
        read: Collection[str] | None = None,
        restore_always: bool = False,
    ) -> None:
        names = names or [str(i) for i in range(len(args))]
        given = {**dict(zip(names, args)), **kwargs}
        tensors = {name: tensor for name, value in given.items() if (tensor := tensor_of(value)) is not None}
        # One copy per storage, so that arguments that alias each other alias in the copies too.
        self._pairs: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}
        for name in (*(tensors if written is None else written), *zeroed):
            value = tensors.get(name)
            if value is not None and value.untyped_storage().nbytes() > 0:
                key = _storage_of(value)
                if key not in self._pairs:  # the whole storage, as 1-D bytes
                    original = torch.empty(0, dtype=torch.uint8, device=value.device).set_(
                        value.untyped_storage()
                    )
                    self._pairs[key] = (original, original.clone())
        reads = {_storage_of(tensor) for name, tensor in tensors.items() if read is None or name in read}
        self._restored = [pair for key, pair in self._pairs.items() if key in reads]
        #: Every argument by name, scratch copies in place: what a tuned kernel's hooks are given. Every
        #: tensor over a copied storage, read-only ones and descriptors' bases included, points at the copy.
        self.named: dict[str, Any] = dict(given)
        for name, tensor in tensors.items():
            pair = self._pairs.get(_storage_of(tensor))
            if pair is not None:  # the tensor as it is, over the copy
                copy = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(
                    pair[1].untyped_storage(), tensor.storage_offset(), tensor.size(), tensor.stride()
                )
                value = given[name]
                self.named[name] = copy if value is tensor else dataclasses.replace(value, base=copy)
        self._zeroed = [t for t in map(tensor_of, (self.named.get(n) for n in zeroed)) if t is not None]
        self.args: tuple[Any, ...] = tuple(self.named[name] for name in names[: len(args)])
        self.kwargs: dict[str, Any] = {name: self.named[name] for name in kwargs}
        self.restore_always = restore_always

    @property
    def copied_bytes(self) -> int:
        return sum(scratch.numel() for _, scratch in self._pairs.values())

    @property
    def restored_bytes(self) -> int:
        """Bytes copied back before each run."""
        return sum(scratch.numel() for _, scratch in self._restored)

    def restore(self) -> None:
        """Give every copy a run may read its first values again (and zero the `zeroed` ones)."""
        for original, scratch in self._restored:
            scratch.copy_(original)
        for tensor in self._zeroed:
            tensor.zero_()

    def changed(self) -> bool:
        """Whether later runs must restore first: always, or when a run wrote a copy (by its bytes)."""
        return self.restore_always or any(
            not torch.equal(original, scratch) for original, scratch in self._pairs.values()
        )


def new_values(
    args: Sequence[Any], kwargs: Mapping[str, Any], input_gen: InputGen | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A selection's example inputs: new tensors with the real inputs' metadata (dtype, sizes, strides,
    offset, device) and random values from a private fixed-seed generator, or `input_gen`'s for the
    positional ones (`generated`).

    Raises:
        ConfigError: `input_gen` returned inputs that do not match the real ones.
    """
    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    generator = example_generator(tensors[0].device if tensors else torch.device("cpu"))

    def fresh(value: Any) -> Any:
        return example_tensor(TensorSpec.of(value), generator) if isinstance(value, torch.Tensor) else value

    made = tuple(map(fresh, args)) if input_gen is None else generated(input_gen, args, kwargs)
    return made, {name: fresh(value) for name, value in kwargs.items()}


def generated(input_gen: InputGen, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """`input_gen(*args, **kwargs)`'s positional example inputs, checked against `args`: one per
    input, with its dtype, sizes, strides and device.

    Raises:
        ConfigError: they do not match.
    """
    made = tuple(input_gen(*args, **kwargs))
    if len(made) != len(args):
        raise ConfigError(
            f"input_gen returned {len(made)} inputs for a call with {len(args)}: "
            "it must return one example per positional input, in order"
        )
    for index, (want, got) in enumerate(zip(args, made)):
        if not isinstance(want, torch.Tensor):
            continue
        if not isinstance(got, torch.Tensor):
            raise ConfigError(
                f"input_gen returned a {type(got).__name__} for input {index}, expected a tensor"
            )
        expected, actual = TensorSpec.of(want), TensorSpec.of(got)
        fields = ("dtype", "size", "stride", "device")
        wrong = [f for f in fields if getattr(actual, f) != getattr(expected, f)]
        if wrong:
            details = ", ".join(f"{f} {getattr(actual, f)} instead of {getattr(expected, f)}" for f in wrong)
            raise ConfigError(
                f"input_gen returned input {index} with {details}: example inputs must have the real "
                "inputs' dtype, size, strides and device (make them with torch.empty_strided)"
            )
    return made
