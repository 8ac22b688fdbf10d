"""A call's arguments and grid as plain data, and made again on another device."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import triton.language as tl

from kernelpick.calls.origins import resolve
from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_generator, example_tensor, laid_out

#: Integer and boolean tensors of at most this many elements (of storage) have their values recorded.
VALUES_LIMIT = 4096


class Unrecordable(Exception):
    """A call that a recording cannot make again (an argument of a type it cannot describe)."""


# -- as data --------------------------------------------------------------------------------------


def grid_data(kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any], grid: Any) -> Any:
    """The grid as data: its integers, or for a function of the meta-parameters its value for each
    distinct set of meta-parameters of the kernel's configs (a config it fails for is left out),
    `{"by_config": [[meta-parameters, grid], ...]}`, worked out on the call's arguments."""
    if not callable(grid):
        return _grid_value(grid)
    named = {**dict(zip(kernel.arg_names, args)), **kwargs}
    table: dict[str, list[Any]] = {}
    for config in kernel.configs:
        meta = {name: encode(value, f"meta-parameter `{name}`") for name, value in config.kwargs.items()}
        identity = json.dumps(meta, sort_keys=True)
        if identity in table:
            continue
        try:
            table[identity] = [meta, _grid_value(grid({**named, **config.kwargs}))]
        except Exception:  # e.g. a grid that divides by a meta-parameter this config lacks
            continue
    if not table:
        raise Unrecordable("its grid function fails for every config")
    return {"by_config": list(table.values())}


def _grid_value(grid: Any) -> list[int]:
    values = list(grid) if isinstance(grid, (tuple, list)) else [grid]
    if not values or not all(isinstance(v, int) for v in values):
        raise Unrecordable(f"its grid is {grid!r}")
    return [int(v) for v in values]


def encode(value: Any, where: str) -> Any:
    """One argument of a call as plain data, which `decode` makes again on another device.

    A tensor is `{"tensor": {dtype, size, stride, offset, aligned}}`, made again with that dtype,
    layout and alignment: floating-point values at random (a fixed seed); the values of an integer or
    boolean tensor of at most `VALUES_LIMIT` elements (indices, offsets, counts: what can decide how
    much work a kernel does) are kept (`values`, its storage from the start) and made again; a larger
    one is made of zeros, an index in bounds of any dimension. Numbers, strings, None and lists are
    as they are; a tuple is `{"tuple": [...]}`, a torch dtype `{"dtype": "float16"}`, a Triton dtype
    `{"triton_dtype": "fp16"}`, an instance of an importable dataclass (a tensor descriptor)
    `{"dataclass": "module:name", "fields": {...}}`.

    Args:
        value: the argument.
        where: the argument's name or place, for the error.

    Raises:
        Unrecordable: `value` is of a type a recording cannot make again; `where` names it.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        return {"tensor": _tensor_data(value, where)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if type(value) is tl.dtype:
        return {"triton_dtype": value.name}
    if isinstance(value, list):
        return [encode(v, where) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # a torch.Size too, not a named tuple
        return {"tuple": [encode(v, where) for v in value]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        found = getattr(sys.modules.get(kind.__module__), kind.__qualname__, None)
        if found is kind and kind.__module__ != "__main__":
            fields = {
                f.name: encode(getattr(value, f.name), where) for f in dataclasses.fields(value) if f.init
            }
            return {"dataclass": f"{kind.__module__}:{kind.__qualname__}", "fields": fields}
    raise Unrecordable(f"{where} is a {type(value).__name__}")


def _tensor_data(tensor: torch.Tensor, where: str) -> dict[str, Any]:
    try:
        spec = TensorSpec.of(tensor)
    except Exception as error:  # a tensor subclass without plain strides, say
        raise Unrecordable(
            f"{where} is a {type(tensor).__name__} whose layout cannot be read ({error})"
        ) from error
    data = spec.to_data()
    if (
        not (spec.dtype.is_floating_point or spec.dtype.is_complex)
        and spec.storage_length <= VALUES_LIMIT
        and _readable(tensor)
    ):
        data["values"] = tensor.as_strided((spec.storage_length,), (1,), 0).tolist()
    return data


def _readable(tensor: torch.Tensor) -> bool:
    """Whether a tensor's values can be read here: it has data, and reading it would not break a
    CUDA graph being captured (a copy to the host is not allowed in one)."""
    from torch._subclasses.fake_tensor import is_fake

    if tensor.device.type == "meta" or is_fake(tensor):
        return False
    return not (tensor.is_cuda and torch.cuda.is_current_stream_capturing())


# -- made again -----------------------------------------------------------------------------------


def decode(data: Any, device: torch.device, generator: torch.Generator) -> Any:
    """An argument made again from `encode`'s data, its tensors on `device`.

    Raises:
        ConfigError: the data is of no form `encode` writes.
    """
    if isinstance(data, list):
        return [decode(v, device, generator) for v in data]
    if not isinstance(data, dict):
        return data
    if "tensor" in data:
        return _make_tensor(data["tensor"], device, generator)
    if "tuple" in data:
        return tuple(decode(v, device, generator) for v in data["tuple"])
    if "dtype" in data:
        dtype = getattr(torch, str(data["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ConfigError(f"a recording names dtype {data['dtype']!r}, which this torch lacks")
        return dtype
    if "triton_dtype" in data:
        return tl.dtype(str(data["triton_dtype"]))
    if "dataclass" in data:
        kind = resolve(str(data["dataclass"]))
        return kind(**{k: decode(v, device, generator) for k, v in data["fields"].items()})
    raise ConfigError(f"a recording holds an argument of no known form: {json.dumps(data)[:200]}")


def _make_tensor(data: Mapping[str, Any], device: torch.device, generator: torch.Generator) -> torch.Tensor:
    dtype = getattr(torch, str(data["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ConfigError(f"a recording names dtype {data['dtype']!r}, which this torch lacks")
    spec = TensorSpec(
        dtype,
        tuple(int(n) for n in data["size"]),
        tuple(int(s) for s in data["stride"]),
        int(data["offset"]),
        device,
        bool(data.get("aligned", True)),
    )
    values = data.get("values")
    if values is not None:
        return laid_out(spec, torch.tensor(values, dtype=dtype, device=device))
    if dtype.is_floating_point or dtype.is_complex:
        return example_tensor(spec, generator)
    return laid_out(spec, torch.zeros(max(spec.storage_length, 1), dtype=dtype, device=device))


class RecordedGrid:
    """A grid function made again from its values for each config's meta-parameters."""

    def __init__(self, table: Sequence[tuple[dict[str, Any], tuple[int, ...]]]) -> None:
        self.table = list(table)

    def __call__(self, meta: Mapping[str, Any]) -> tuple[int, ...]:
        for wanted, grid in self.table:
            if all(meta.get(name) == value for name, value in wanted.items()):
                return grid
        given = {name: meta.get(name) for name in self.table[0][0]} if self.table else {}
        raise ConfigError(
            f"the recording has no grid for the meta-parameters {given}: the kernel's configs changed "
            "since it was recorded; record again"
        )


def grid_of(data: Any) -> tuple[int, ...] | RecordedGrid:
    """The grid a recording's `grid` describes: a tuple, or a `RecordedGrid`."""
    if isinstance(data, dict):
        cpu = torch.device("cpu")
        generator = example_generator(cpu)
        return RecordedGrid(
            [
                ({k: decode(v, cpu, generator) for k, v in meta.items()}, tuple(grid))
                for meta, grid in data["by_config"]
            ]
        )
    return tuple(int(v) for v in data)
