"""Example inputs for benchmarking: new tensors with the real inputs' metadata, never the real ones.

Values come from a private, fixed-seed generator, so tuning neither reads the caller's data nor moves
the caller's random number generators, and two processes benchmark on the same values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from kernelpick.bench.inputs import ScratchArguments
from kernelpick.errors import ConfigError
from kernelpick.select.signature import TensorSpec

#: The seed of the generator that fills example inputs.
EXAMPLE_SEED = 0x6B70

InputGen = Callable[..., Sequence[Any]]


def example_generator(device: torch.device) -> torch.Generator:
    """A new generator on `device` seeded with `EXAMPLE_SEED`: where example values come from."""
    generator = torch.Generator(device=device)
    generator.manual_seed(EXAMPLE_SEED)
    return generator


def _values(count: int, dtype: torch.dtype, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """`count` values suited to `dtype`: standard normal floats, small integers, fair booleans."""
    if dtype.is_complex:
        return torch.randn(count, dtype=dtype, device=device, generator=generator)
    if dtype.is_floating_point:
        values = torch.randn(count, dtype=torch.float32, device=device, generator=generator)
        if dtype.itemsize == 1:  # float8: keep well inside the narrowest range
            values = values.clamp(-4.0, 4.0)
        return values.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), device=device, generator=generator).bool()
    low = 0 if dtype == torch.uint8 or str(dtype).startswith("torch.uint") else -8
    return torch.randint(low, 16 + low, (count,), device=device, generator=generator).to(dtype)


def laid_out(spec: TensorSpec, flat: torch.Tensor) -> torch.Tensor:
    """`flat`'s values (`spec.storage_length` or more, in storage order) with `spec`'s size, strides,
    storage offset and alignment: a spec misaligned at an aligned offset gets a copy of `flat` in a
    storage that itself starts off a 16-byte boundary."""
    if spec.aligned or spec.offset * spec.itemsize % 16:
        return flat.as_strided(spec.size, spec.stride, spec.offset)
    length = spec.storage_length
    storage = flat.new_empty(length + 1).untyped_storage()[min(spec.itemsize, 8) :]
    shifted = flat.new_empty(0).set_(storage, 0, (length,), (1,))
    shifted.copy_(flat[:length])
    return shifted.as_strided(spec.size, spec.stride, spec.offset)


def example_tensor(spec: TensorSpec, generator: torch.Generator) -> torch.Tensor:
    """A new tensor with `spec`'s dtype, device, size, strides, storage offset and alignment, filled with
    random values."""
    return laid_out(spec, _values(max(spec.storage_length, 1), spec.dtype, spec.device, generator))


@contextlib.contextmanager
def preserved_rng(device: torch.device) -> Iterator[None]:
    """Restore the CPU random state (and `device`'s, for a CUDA device) when the block ends."""
    devices = (
        [device.index if device.index is not None else torch.cuda.current_device()]
        if (device.type == "cuda")
        else []
    )
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        yield


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
