"""How much work a tuned call does (FLOPs and bytes moved), for roofline figures: the user's or built in."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from kernelpick.console import forget_warning, warn_once
from kernelpick.errors import ReportError

log = logging.getLogger("kernelpick.reports")

#: A figure of work: a number, or a function of the key that gives one.
Figure = float | Callable[[Mapping[str, Any]], float]


@dataclass(frozen=True, slots=True)
class Work:
    """The FLOPs and bytes of one kernel or selector's calls, each a number or a function of the key."""

    flops: Figure | None = None
    bytes: Figure | None = None


_registered: dict[str, Work] = {}  # one item set or popped at a time: atomic, no lock needed


def work(name: str, *, flops: Figure | None = None, bytes: Figure | None = None) -> None:
    """Say how many floating-point operations and bytes of memory traffic a call of `name` costs.

    Register before tuning: the tuning log then records `flops` and `bytes` for each tuned key, and
    `kernelpick report` shows achieved TFLOP/s and GB/s against the device's peaks. Registering a
    name again replaces what it had.

    Args:
        name: the tuned kernel's name (its function's `__name__`) or the selector's name.
        flops: a number, or a function of the key (a mapping: docs/ops-decisions.md lists its fields).
        bytes: likewise, the bytes read and written (each tensor once, as with perfect caching).

    Raises:
        ReportError: neither figure given, or one that is neither a number nor callable.
    """
    if flops is None and bytes is None:
        raise ReportError(f"work({name!r}) needs flops=, bytes= or both: a number or a function of the key")
    for label, figure in (("flops", flops), ("bytes", bytes)):
        if figure is not None and not callable(figure) and not isinstance(figure, (int, float)):
            raise ReportError(
                f"work({name!r}, {label}=...) must be a number or a function of the key, got "
                f"{type(figure).__name__}"
            )
    _registered[name] = Work(flops, bytes)
    forget_warning(log, f"work function of {name}")  # a failure of the new functions is said again


def forget_work(name: str) -> None:
    """Forget what `work` registered for `name` (the built-in GEMM figures stay)."""
    _registered.pop(name, None)


def work_of(name: str, key: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) of a call of `name` with `key`: registered, else built in, else unknown (None);
    None too where a registered function raises, with one warning per name."""
    registered = _registered.get(name)
    if registered is not None:
        return _figure(name, registered.flops, key), _figure(name, registered.bytes, key)
    product = matrix_product(name, key)  # built in: a GEMM selector's, from the shapes of its key's tensors
    return (None, None) if product is None else (product.flops, product.bytes)


def _figure(name: str, figure: Figure | None, key: Mapping[str, Any]) -> float | None:
    if figure is None:
        return None
    try:
        return float(figure(key) if callable(figure) else figure)
    except Exception as error:  # a user function must not fail a tuning: said once per name
        message = "the work function of %s failed for key %s (%r): no roofline figures"
        warn_once(log, f"work function of {name}", message, name, dict(key), error)
        return None


def gemm_name(name: str) -> str | None:
    """The product a GEMM selector computes ("mm", "addmm", "bmm" or "scaled_mm"; kernelpick.ops's too),
    else None. `scaled_mm` is only kernelpick.ops's, whose names end in the output dtype."""
    base = name.removeprefix("kernelpick.ops.").removesuffix("_tf32")
    if base in ("mm", "bmm", "addmm") or base.startswith("addmm_"):
        return base.split("_")[0]
    if name.startswith("kernelpick.ops.scaled_mm") and name.rsplit("_", 1)[-1] in _SCALED_OUTPUTS:
        return "scaled_mm"
    return None


#: The output dtype of kernelpick.ops's scaled_mm selectors, by the end of their names.
_SCALED_OUTPUTS = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True, slots=True)
class MatrixProduct:
    """One call of a GEMM selector, from its key: `batch` products of A (M, K) and B (K, N). `a`, `b`
    and `others` (bias, scale_a, scale_b: by name) are the key's tensors as plain data."""

    op: str  # "mm", "addmm", "bmm" or "scaled_mm"
    batch: int
    m: int
    n: int
    k: int
    a: Mapping[str, Any]
    b: Mapping[str, Any]
    others: tuple[tuple[str, Mapping[str, Any]], ...]
    out_dtype: str

    @property
    def flops(self) -> float:
        """2·M·N·K multiply-adds' operations per product, times the batch."""
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def bytes(self) -> float | None:
        """Bytes read and written with perfect caching: every input once (at decode, the weight B is
        nearly all of it) and the output once; None when a dtype is unknown."""
        tensors = [self.a, self.b, *(tensor for _, tensor in self.others)]
        sizes = [itemsize(str(t["dtype"])) for t in tensors]
        out_size = itemsize(self.out_dtype)
        if out_size is None or any(size is None for size in sizes):
            return None
        moved = sum(math.prod(int(n) for n in t["size"]) * (size or 0) for t, size in zip(tensors, sizes))
        return float(moved + self.batch * self.m * self.n * out_size)


def matrix_product(name: str, key: Mapping[str, Any]) -> MatrixProduct | None:
    """The product a call of the GEMM selector `name` with `key` computes (`gemm_name`), or None: another
    selector, or tensors that do not multiply."""
    op = gemm_name(name)
    if op is None:
        return None
    tensors = [t for t in key.get("inputs", []) if isinstance(t, Mapping) and "size" in t and "dtype" in t]
    others: list[tuple[str, Mapping[str, Any]]] = []
    if op == "addmm" and len(tensors) == 3:
        bias, a, b = tensors
        others = [("bias", bias)]
    elif op in ("mm", "bmm") and len(tensors) == 2:
        a, b = tensors
    elif op == "scaled_mm" and len(tensors) in (4, 5):
        a, b = tensors[:2]
        others = list(zip(("scale_a", "scale_b", "bias"), tensors[2:]))
    else:
        return None
    a_size, b_size = list(a["size"]), list(b["size"])
    if len(a_size) != len(b_size) or len(a_size) not in (2, 3) or a_size[-1] != b_size[-2]:
        return None
    batch = int(a_size[0]) if len(a_size) == 3 else 1
    m, k, n = (int(extent) for extent in (a_size[-2], a_size[-1], b_size[-1]))
    out_dtype = _SCALED_OUTPUTS[name.rsplit("_", 1)[-1]] if op == "scaled_mm" else str(a["dtype"])
    return MatrixProduct(op, batch, m, n, k, a, b, tuple(others), out_dtype.removeprefix("torch."))


def itemsize(dtype: str) -> int | None:
    """Bytes per element of a dtype named as in keys ("float16", "torch.bfloat16"), or None."""
    found = getattr(torch, str(dtype).removeprefix("torch."), None)
    return found.itemsize if isinstance(found, torch.dtype) else None
