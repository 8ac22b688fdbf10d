"""Store keys: every fact that invalidates a tuning result, hashed with sha256 of a canonical form."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from kernelpick.device import DeviceInfo


@dataclass(frozen=True, slots=True)
class Toolchain:
    """Versions of what compiles and runs kernels; a result measured under others is not reused."""

    triton: str
    torch: str
    cuda: str | None

    @staticmethod
    @functools.cache
    def current() -> Toolchain:
        import triton

        return Toolchain(triton=triton.__version__, torch=torch.__version__, cuda=torch.version.cuda)

    def describe(self) -> str:
        """How people and tools name it: `triton 3.6.0, torch 2.11.0+cu130, CUDA 13.0`."""
        return f"triton {self.triton}, torch {self.torch}, CUDA {self.cuda or 'none'}"


@dataclass(frozen=True, eq=False)
class TuningKey:
    """Identifies one tuning problem: which kernel, on which device and toolchain, for which inputs.

    Results are stored per (key, candidate); a result is reused only under an equal key.
    """

    kernel: str  # the kernel's qualified name, for people reading the store
    source: str  # hash of the kernel's source and of the `@triton.jit` helpers it calls
    device: str  # the device model, e.g. "NVIDIA H100 80GB HBM3" or "cpu"
    capability: str  # e.g. "9.0"; "" on CPUs
    toolchain: Toolchain
    # canonical tuning-key values, dtypes, what Triton specializes on (pointer alignment, integers
    # divisible by 16 or equal to 1) and whatever else the caller adds; see `MEASUREMENT_VERSION`
    inputs: tuple[Any, ...]

    @classmethod
    def make(cls, kernel: str, source: str, device: DeviceInfo, inputs: Sequence[Any]) -> TuningKey:
        inputs = tuple(canonical_value(v) for v in inputs)
        return cls(kernel, source, device.name, device.capability_text, Toolchain.current(), inputs)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["inputs"] = list(self.inputs)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TuningKey:
        """Rebuild a key from `to_dict()` output (plain data from a store or a table).

        Raises:
            ValueError: `data` lacks a field or has one of the wrong type.
        """
        try:
            toolchain = data["toolchain"]
            key = cls(
                kernel=str(data["kernel"]),
                source=str(data["source"]),
                device=str(data["device"]),
                capability=str(data["capability"]),
                toolchain=Toolchain(str(toolchain["triton"]), str(toolchain["torch"]), toolchain["cuda"]),
                inputs=tuple(data["inputs"]),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a tuning key: {error!r} in {str(data)[:200]}") from None
        if key.toolchain.cuda is not None and not isinstance(key.toolchain.cuda, str):
            raise ValueError(f"not a tuning key: toolchain.cuda is {key.toolchain.cuda!r}")
        if nesting(key.inputs) > MAX_NESTING:
            raise ValueError(f"not a tuning key: its inputs are nested over {MAX_NESTING} deep")
        return key

    @functools.cached_property
    def canonical(self) -> str:
        return canonical_json(self.to_dict())

    @functools.cached_property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical.encode()).hexdigest()

    def __eq__(self, other: object) -> bool:
        # By canonical form, like the hash and the digest: field-wise `==` would call keys with
        # inputs (True,) and (1,) equal although their digests, and so their stored results, differ.
        return isinstance(other, TuningKey) and other.canonical == self.canonical

    def __hash__(self) -> int:
        return hash(self.canonical)


#: How deep lists and objects read from a store or a table may nest: kernelpick's keys and
#: descriptions nest a few levels; deeper data would exhaust the recursion of what hashes or shows it.
MAX_NESTING = 32


def nesting(data: Any) -> int:
    """How deep lists, tuples and mappings nest in `data` (0 for a scalar), worked out without
    recursion; counting stops past `MAX_NESTING` (it returns `MAX_NESTING + 1` then)."""
    deepest, pending = 0, [(data, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, Mapping):
            value = list(value.values())
        if isinstance(value, (list, tuple)):
            if depth + 1 > MAX_NESTING:
                return MAX_NESTING + 1
            deepest = max(deepest, depth + 1)
            pending.extend((item, depth + 1) for item in value)
    return deepest


def canonical_json(data: Any) -> str:
    """JSON with sorted keys and no spaces: equal data, equal text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def canonical_value(value: Any) -> Any:
    """A JSON-able stand-in for a key value: numbers and strings as they are, dtypes by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [canonical_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "stride": list(value.stride())}
    return f"{type(value).__qualname__}:{value!r}"
