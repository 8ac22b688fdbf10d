"""Tensors as data: `TensorSpec`, the metadata without the values, and example tensors made from it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch


def is_aligned(tensor: torch.Tensor) -> bool:
    """Whether `tensor`'s data (its storage offset included) starts at a multiple of 16 bytes, as Triton
    checks; from the offset alone for tensors without an address (meta, fake)."""
    from torch._subclasses.fake_tensor import is_fake

    if tensor.device.type == "meta" or is_fake(tensor):
        return tensor.storage_offset() * tensor.element_size() % 16 == 0
    return bool(tensor.data_ptr() % 16 == 0)


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A tensor's metadata without its values: enough to render a kernel or make an example input."""

    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    device: torch.device
    #: Whether the data starts at a multiple of 16 bytes (`is_aligned`); examples made for the spec do too.
    aligned: bool = True

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorSpec:
        return cls(
            tensor.dtype,
            tuple(int(n) for n in tensor.shape),
            tuple(int(s) for s in tensor.stride()),
            int(tensor.storage_offset()),
            tensor.device,
            is_aligned(tensor),
        )

    @classmethod
    def contiguous(cls, size: Sequence[int], dtype: torch.dtype, device: torch.device) -> TensorSpec:
        """The spec of a new row-major tensor."""
        strides: list[int] = []
        step = 1
        for extent in reversed(size):
            strides.append(step)
            step *= max(int(extent), 1)
        return cls(dtype, tuple(int(s) for s in size), tuple(reversed(strides)), 0, device, True)

    @property
    def ndim(self) -> int:
        return len(self.size)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def numel(self) -> int:
        count = 1
        for extent in self.size:
            count *= extent
        return count

    @property
    def storage_length(self) -> int:
        """Elements the storage must hold, from its start, for this view to fit."""
        if self.numel == 0:
            return self.offset
        return self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride)) + 1

    def broadcast_strides(self, size: Sequence[int]) -> tuple[int, ...]:
        """Strides of this tensor broadcast to `size` (right-aligned; broadcast dimensions get stride 0).

        Raises:
            ValueError: this tensor does not broadcast to `size`.
        """
        if len(self.size) > len(size):
            raise ValueError(f"a tensor of size {list(self.size)} does not broadcast to {list(size)}")
        pad = len(size) - len(self.size)
        strides = [0] * pad
        for extent, stride, target in zip(self.size, self.stride, size[pad:]):
            if extent == target and extent != 1:
                strides.append(stride)
            elif extent == 1:
                strides.append(0)
            else:
                raise ValueError(f"a tensor of size {list(self.size)} does not broadcast to {list(size)}")
        return tuple(strides)

    def to_data(self) -> dict[str, Any]:
        """Plain data, for store keys."""
        return {
            "dtype": str(self.dtype).removeprefix("torch."),
            "size": list(self.size),
            "stride": list(self.stride),
            "offset": self.offset,
            # A flag, not a number: a deployment table's nearest key never matches across it.
            "aligned": self.aligned,
        }

    def __str__(self) -> str:
        layout = (
            ""
            if self.stride == TensorSpec.contiguous(self.size, self.dtype, self.device).stride
            else (f" stride={list(self.stride)}")
        )
        offset = f" offset={self.offset}" if self.offset else ""
        # Said when the offset does not say it: the storage itself starts off a 16-byte boundary.
        misaligned = "" if self.aligned or self.offset * self.itemsize % 16 else " misaligned"
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.size)}{layout}{offset}{misaligned}"


#: The seed of the generator that fills example inputs.
EXAMPLE_SEED = 0x6B70


def example_generator(device: torch.device) -> torch.Generator:
    """A new generator on `device` seeded with `EXAMPLE_SEED`: where example values come from.

    Private, so that tuning never moves the caller's random number generators; seeded alike
    everywhere, so that two processes benchmark on the same values.
    """
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


def is_descriptor(value: Any) -> bool:
    """Whether `value` is a host tensor descriptor: a dataclass instance with a tensor in its `base`
    field (Triton's `TensorDescriptor`, Gluon's), which Triton compiles a kernel for by its dtype and
    block shape."""
    return (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and isinstance(getattr(value, "base", None), torch.Tensor)
    )


def holds_descriptor(values: Iterable[Any]) -> bool:
    """Whether any of `values` is, or a tuple or list of them holds, a tensor descriptor."""
    return any(
        is_descriptor(value) or (isinstance(value, (tuple, list)) and holds_descriptor(value))
        for value in values
    )


def own_descriptors(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` with every tensor descriptor (in tuples and lists too) replaced by a copy of its
    own, over the same tensor: what one config's hooks may set (a block shape) without touching
    another config's arguments or the caller's."""

    def own(value: Any) -> Any:
        if is_descriptor(value):  # its block shape is a list, which a hook may change in place
            return dataclasses.replace(value, block_shape=list(value.block_shape))
        if isinstance(value, list) and holds_descriptor(value):
            return [own(item) for item in value]
        if isinstance(value, tuple) and holds_descriptor(value):
            items = [own(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        return value

    return {name: own(value) for name, value in arguments.items()}
