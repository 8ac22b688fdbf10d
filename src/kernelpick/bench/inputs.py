"""Benchmark inputs: scratch copies of what a kernel may write, and a selection's example inputs.

The user's tensors are never written while tuning. Copies are made per storage, so arguments that
alias each other alias in the copies too, and a copy is restored before each run only when the kernel
may also read its storage (restoring what it only writes would only add memory traffic).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import torch

from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_generator, example_tensor, is_descriptor

InputGen = Callable[..., Sequence[Any]]


def _flat_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The whole storage behind `tensor`, as a 1-D uint8 tensor."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())


def tensor_of(value: Any) -> torch.Tensor | None:
    """The tensor an argument reads or writes: the tensor itself, or a tensor descriptor's base."""
    if isinstance(value, torch.Tensor):
        return value
    if is_descriptor(value):
        base: torch.Tensor = value.base
        return base
    return None


def _view_into(storage_bytes: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A tensor over `storage_bytes` with `like`'s dtype, size, strides and offset."""
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(
        storage_bytes.untyped_storage(), like.storage_offset(), like.size(), like.stride()
    )


class ScratchArguments:
    """Launch arguments in which the tensors a kernel may write are replaced by scratch copies.

    Args:
        arguments: the launch's arguments by name.
        written: names of arguments the kernel may write (all tensors, when unsure).
        zeroed: names of arguments to zero before each run instead of restoring (`reset_to_zero`).
        read: names of arguments the kernel may read (None: all of them). A written storage that no
            read argument shares is copied once and never restored.
    """

    def __init__(
        self,
        arguments: Mapping[str, Any],
        written: Collection[str],
        zeroed: Collection[str] = (),
        read: Collection[str] | None = None,
    ) -> None:
        self._pairs: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}
        for name in (*written, *zeroed):
            value = tensor_of(arguments.get(name))
            if value is not None and value.untyped_storage().nbytes() > 0:
                key = (value.untyped_storage().data_ptr(), value.device)
                if key not in self._pairs:
                    original = _flat_bytes(value)
                    self._pairs[key] = (original, original.clone())
        read_storages = {
            (tensor.untyped_storage().data_ptr(), tensor.device)
            for name, value in arguments.items()
            if (read is None or name in read) and (tensor := tensor_of(value)) is not None
        }
        self._restored = [pair for key, pair in self._pairs.items() if key in read_storages]
        # Every tensor over a copied storage, read-only ones and descriptors' bases included, now
        # points at the copy.
        self.arguments: dict[str, Any] = {}
        for name, value in arguments.items():
            tensor = tensor_of(value)
            if tensor is not None:
                pair = self._pairs.get((tensor.untyped_storage().data_ptr(), tensor.device))
                if pair is not None:
                    copy = _view_into(pair[1], tensor)
                    value = copy if value is tensor else dataclasses.replace(value, base=copy)
            self.arguments[name] = value
        self._zeroed = [t for t in map(tensor_of, (self.arguments.get(n) for n in zeroed)) if t is not None]

    @property
    def copied_bytes(self) -> int:
        return sum(scratch.numel() for _, scratch in self._pairs.values())

    @property
    def restored_bytes(self) -> int:
        """Bytes copied back before each run."""
        return sum(scratch.numel() for _, scratch in self._restored)

    def restore(self) -> None:
        """Give every copy the kernel may read the user's values again (and zero the `zeroed` ones)."""
        for original, scratch in self._restored:
            scratch.copy_(original)
        for tensor in self._zeroed:
            tensor.zero_()


class ExampleInputs:
    """Inputs to benchmark and verify choices on, restorable to their first values.

    Args:
        args: the call's positional inputs (the real ones; only their metadata is used unless
            `input_gen` is given).
        kwargs: the call's keyword inputs.
        input_gen: `input_gen(*args, **kwargs)` returns positional example inputs to use instead of
            random ones; they must have the real inputs' dtypes, sizes, strides and devices.

    Raises:
        ConfigError: `input_gen` returned inputs that do not match the real ones.
    """

    def __init__(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], input_gen: InputGen | None = None
    ) -> None:
        tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device("cpu")
        generator = example_generator(device)

        def fresh(value: Any) -> Any:
            return (
                example_tensor(TensorSpec.of(value), generator) if isinstance(value, torch.Tensor) else value
            )

        if input_gen is None:
            made = [fresh(v) for v in args]
        else:
            made = list(input_gen(*args, **kwargs))
            _check_generated(args, made)
        named = {f"arg{i}": v for i, v in enumerate(made)}
        named.update({f"kw:{k}": fresh(v) for k, v in kwargs.items()})
        self._originals = named
        self._scratch = ScratchArguments(named, [n for n, v in named.items() if isinstance(v, torch.Tensor)])
        values = self._scratch.arguments
        self.args: tuple[Any, ...] = tuple(values[f"arg{i}"] for i in range(len(made)))
        self.kwargs: dict[str, Any] = {k: values[f"kw:{k}"] for k in kwargs}

    def restore(self) -> None:
        """Give every example tensor its first values again."""
        self._scratch.restore()

    def changed(self) -> bool:
        """Whether a run wrote any example input (so runs must restore them first)."""
        for name, original in self._originals.items():
            if isinstance(original, torch.Tensor) and not torch.equal(
                original, self._scratch.arguments[name]
            ):
                return True
        return False


class GivenInputs(ExampleInputs):
    """A call's own inputs, as they are, for what only needs their metadata and addresses: compiling a
    choice binds its arguments to them (`Choice.compile_job`). No copies are made and nothing runs on
    them, so there is nothing to restore."""

    def __init__(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        # No ExampleInputs.__init__: it would make random copies of every input.
        self.args = tuple(args)
        self.kwargs = dict(kwargs)

    def restore(self) -> None:
        pass

    def changed(self) -> bool:
        return False


def _check_generated(real: Sequence[Any], made: Sequence[Any]) -> None:
    if len(made) != len(real):
        raise ConfigError(
            f"input_gen returned {len(made)} inputs for a call with {len(real)}: "
            "it must return one example per positional input, in order"
        )
    for index, (want, got) in enumerate(zip(real, made)):
        if not isinstance(want, torch.Tensor):
            continue
        expected = TensorSpec.of(want)
        if not isinstance(got, torch.Tensor):
            raise ConfigError(
                f"input_gen returned a {type(got).__name__} for input {index}, expected a tensor"
            )
        actual = TensorSpec.of(got)
        fields = ("dtype", "size", "stride", "device")
        wrong = [f for f in fields if getattr(actual, f) != getattr(expected, f)]
        if wrong:
            details = ", ".join(f"{f} {getattr(actual, f)} instead of {getattr(expected, f)}" for f in wrong)
            raise ConfigError(
                f"input_gen returned input {index} with {details}: example inputs must have the real "
                "inputs' dtype, size, strides and device (make them with torch.empty_strided)"
            )


class KernelArguments:
    """A tuned kernel's call arguments for benchmarking: scratch copies of those it may write
    (`ScratchArguments`), restored before every run.

    Args:
        names: the kernel's argument names, in order (the positional arguments are its first ones).
        args: the call's positional arguments.
        kwargs: the call's keyword arguments.
        written, zeroed, read: as for `ScratchArguments`.
    """

    def __init__(
        self,
        names: Sequence[str],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        written: Collection[str],
        zeroed: Collection[str] = (),
        read: Collection[str] | None = None,
    ) -> None:
        named = {**dict(zip(names, args)), **kwargs}
        self._scratch = ScratchArguments(named, written, zeroed=zeroed, read=read)
        arguments = self._scratch.arguments
        self.args: tuple[Any, ...] = tuple(arguments[name] for name in names[: len(args)])
        self.kwargs: dict[str, Any] = {name: arguments[name] for name in kwargs}

    @property
    def named(self) -> dict[str, Any]:
        """Every argument by name, scratch copies in place: what hooks are given."""
        return self._scratch.arguments

    def restore(self) -> None:
        self._scratch.restore()

    def changed(self) -> bool:
        return True  # restored before every run whatever it does
