"""What a corpus case is, and the argument makers the corpus kernels share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

TRITON_VERSION = tuple(int(p) for p in triton.__version__.split(".")[:2])
#: Triton 3.9 removed block pointers (`tl.make_block_ptr`, `tl.advance`) in favour of tensor descriptors.
HAS_BLOCK_POINTERS = TRITON_VERSION < (3, 9)
#: `tl.atomic_load` and `tl.atomic_store` arrived after 3.6.
HAS_ATOMIC_LOAD_STORE = hasattr(tl, "atomic_load") and hasattr(tl, "atomic_store")

BLOCK = 16


def f32(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.float32, device="meta")


def i32(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.int32, device="meta")


def i64(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.int64, device="meta")


def f8(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.float8_e4m3fn, device="meta")


#: Every element type Triton has (fp8 variants included, whether or not torch has a dtype for them).
TRITON_ELEMENT_TYPES: list[tl.dtype] = sorted(
    {
        value
        for value in vars(tl).values()
        if isinstance(value, tl.dtype) and not isinstance(value, tl.pointer_type) and str(value) != "void"
    },
    key=str,
)


def triton_typed(dtype: tl.dtype, n: int = 1024) -> Any:
    """A tensor Triton sees as holding `dtype` elements (`triton.reinterpret`), for types torch lacks."""
    return triton.reinterpret(torch.empty(n, dtype=torch.uint8, device="meta"), dtype)


def descriptor(rows: int = 64, cols: int = 64, block: tuple[int, int] = (BLOCK, BLOCK)) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(torch.empty(rows, cols, device="meta"), list(block))


@dataclass(frozen=True)
class Case:
    """One kernel, how to call it, and the answer the analysis must give."""

    name: str
    kernel: Any
    arguments: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
    read: tuple[str, ...]
    written: tuple[str, ...]
    constructs: tuple[str, ...]
    certain: bool = True
    reason: str = ""  # a fragment the reason must contain when not certain
    elsewhere: str = ""  # a fragment `writes_elsewhere` must contain; empty: it must be empty
    available: bool = True
    unavailable_because: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def blocked(**extra: Any) -> dict[str, Any]:
    return {"BLOCK": BLOCK, **extra}
