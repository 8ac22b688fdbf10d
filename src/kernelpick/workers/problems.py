"""Arguments as plain data, and back: how a worker re-creates a tuning problem in its own process."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from kernelpick.errors import IsolationError
from kernelpick.tensors import TensorSpec, example_tensor, is_descriptor, laid_out

_PLAIN = (type(None), bool, int, float, str)
_files = itertools.count()


def describe_value(value: Any, payload_dir: Path | None) -> dict[str, Any]:
    """One argument as plain data; an integer or boolean tensor's values written to a file in
    `payload_dir` (None: they do not travel, the worker makes new ones).

    Raises:
        IsolationError: the value cannot travel to another process (an arbitrary object).
    """
    if isinstance(value, torch.Tensor):
        spec = TensorSpec.of(value)
        data: dict[str, Any] = {"kind": "tensor", **spec.to_data()}
        if payload_dir is not None and not (value.dtype.is_floating_point or value.dtype.is_complex):
            if value.is_cuda and torch.cuda.is_current_stream_capturing():
                raise IsolationError(
                    f"a {value.dtype} tensor's values cannot be copied for a worker while a CUDA graph "
                    "is captured"
                )
            path = payload_dir / f"tensor-{next(_files)}.pt"
            flat = value.detach().as_strided((spec.storage_length,), (1,), 0)  # its whole storage
            torch.save(flat.cpu().clone(), path)
            data["values"] = str(path)
        return data
    if isinstance(value, _PLAIN):
        return {"kind": "value", "value": value}
    if is_descriptor(value):
        return _describe_descriptor(value, payload_dir)
    if isinstance(value, (tuple, list)):
        return {"kind": type(value).__name__, "items": [describe_value(v, payload_dir) for v in value]}
    if type(value).__module__.startswith("triton") and hasattr(value, "primitive_bitwidth"):
        return {"kind": "triton_dtype", "name": str(value)}
    raise IsolationError(
        f"an argument of type {type(value).__name__} cannot be sent to a worker process: "
        "pass tensors, numbers, strings or Triton dtypes (or isolate=False)"
    )


def _describe_descriptor(value: Any, payload_dir: Path | None) -> dict[str, Any]:
    """A tensor descriptor as plain data: its tensor and its other fields; IsolationError for any but
    Triton's own `TensorDescriptor`, or a field that is not plain data (a Gluon descriptor's layout)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    fields: dict[str, Any] = {}
    for field in dataclasses.fields(value):
        if field.name == "base":
            continue
        item = getattr(value, field.name)
        if isinstance(item, (tuple, list, torch.Size)):
            item = [int(v) for v in item]
        if type(value) is not TensorDescriptor or not isinstance(item, (*_PLAIN, list)):
            raise IsolationError(
                f"a {type(value).__name__} ({type(value).__module__}:{type(value).__qualname__}) cannot "
                "be sent to a worker process: only triton.tools.tensor_descriptor.TensorDescriptor can "
                "(or isolate=False)"
            )
        fields[field.name] = item
    return {"kind": "descriptor", "base": describe_value(value.base, payload_dir), "fields": fields}


def rebuild_value(data: Mapping[str, Any], device: torch.device, generator: torch.Generator) -> Any:
    """The argument `describe_value` described, re-created on `device`."""
    kind = data["kind"]
    if kind == "value":
        return data["value"]
    if kind == "descriptor":
        from triton.tools.tensor_descriptor import TensorDescriptor

        return TensorDescriptor(base=rebuild_value(data["base"], device, generator), **data["fields"])
    if kind in ("tuple", "list"):
        items = [rebuild_value(item, device, generator) for item in data["items"]]
        return tuple(items) if kind == "tuple" else items
    if kind == "triton_dtype":
        import triton.language as tl

        return getattr(tl, data["name"])
    dtype = getattr(torch, data["dtype"])  # as the caller's torch named it (`TensorSpec.to_data`)
    spec = TensorSpec(
        dtype, tuple(data["size"]), tuple(data["stride"]), data["offset"], device, data["aligned"]
    )
    if data.get("values") is None:
        return example_tensor(spec, generator)
    return laid_out(spec, torch.load(data["values"], weights_only=True).to(device))
