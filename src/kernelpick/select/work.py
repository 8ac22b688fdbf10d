"""How much work a tuned call does (FLOPs and bytes moved), for roofline figures: the user's or built in.

`work("my_matmul", flops=lambda key: 2 * key["M"] * key["N"] * key["K"])` registers functions of a
tuning's key; the tuning log then records the figures of every tuning of that kernel or selector.
A tuned kernel's key maps its key argument names to their values, with `dtypes` (the tensor
arguments' dtype names); a selector's has `inputs` (a tensor as {dtype, size, stride, offset}),
`kwargs` and `user_key`. The GEMM selectors (`mm`, `addmm`, `bmm` and `kernelpick.ops`'s) need none.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from kernelpick.errors import ReportError

log = logging.getLogger("kernelpick.reports")

#: A figure of work: a number, or a function of the key that gives one.
Figure = float | Callable[[Mapping[str, Any]], float]


@dataclass(frozen=True, slots=True)
class Work:
    """The FLOPs and bytes of one kernel or selector's calls, each a number or a function of the key."""

    flops: Figure | None = None
    bytes: Figure | None = None


_registered: dict[str, Work] = {}
_failed: set[str] = set()
_lock = threading.Lock()


def work(name: str, *, flops: Figure | None = None, bytes: Figure | None = None) -> None:
    """Say how many floating-point operations and bytes of memory traffic a call of `name` costs.

    Register before tuning: the tuning log then records `flops` and `bytes` for each tuned key, and
    `kernelpick report` shows achieved TFLOP/s and GB/s against the device's peaks. Registering a
    name again replaces what it had.

    Args:
        name: the tuned kernel's name (its function's `__name__`) or the selector's name.
        flops: a number, or a function of the key (a mapping: see this module's docstring).
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
    with _lock:
        _registered[name] = Work(flops, bytes)
        _failed.discard(name)


def forget_work(name: str) -> None:
    """Forget what `work` registered for `name` (the built-in GEMM figures stay)."""
    with _lock:
        _registered.pop(name, None)


def work_of(name: str, key: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) of a call of `name` with `key`: registered, else built in, else unknown (None).

    A registered function that raises gives None, with one warning per name.
    """
    registered = _registered.get(name)
    if registered is not None:
        return _figure(name, registered.flops, key), _figure(name, registered.bytes, key)
    if gemm_name(name) is not None:
        return gemm_work(name, key)
    return None, None


def _figure(name: str, figure: Figure | None, key: Mapping[str, Any]) -> float | None:
    if figure is None:
        return None
    try:
        return float(figure(key) if callable(figure) else figure)
    except Exception as error:  # a user function must not fail a tuning
        with _lock:
            first = name not in _failed
            _failed.add(name)
        if first:
            log.warning(
                "the work function of %s failed for key %s (%r): no roofline figures", name, dict(key), error
            )
        return None


def gemm_name(name: str) -> str | None:
    """The product a GEMM selector computes ("mm", "addmm" or "bmm"; kernelpick.ops's too), else None."""
    base = name.removeprefix("kernelpick.ops.").removesuffix("_tf32")
    if base in ("mm", "bmm", "addmm") or base.startswith("addmm_"):
        return base.split("_")[0]
    return None


def gemm_work(name: str, key: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """2·M·N·K FLOPs (times the batch for bmm) and (M·K + K·N + M·N) elements moved (plus the bias
    for addmm), from the shapes of a selector key's tensors."""
    tensors = [t for t in key.get("inputs", []) if isinstance(t, Mapping) and "size" in t and "dtype" in t]
    op = gemm_name(name)
    if op == "addmm" and len(tensors) == 3:
        bias, a, b = tensors
    elif op in ("mm", "bmm") and len(tensors) == 2:
        bias, (a, b) = None, tensors
    else:
        return None, None
    a_size, b_size = list(a["size"]), list(b["size"])
    if len(a_size) != len(b_size) or len(a_size) not in (2, 3) or a_size[-1] != b_size[-2]:
        return None, None
    batch = a_size[0] if len(a_size) == 3 else 1
    m, k, n = a_size[-2], a_size[-1], b_size[-1]
    bias_elements = math.prod(int(extent) for extent in bias["size"]) if bias is not None else 0
    elements = batch * (m * k + k * n + m * n) + bias_elements
    size = itemsize(a["dtype"])
    return 2.0 * batch * m * n * k, None if size is None else float(elements * size)


def itemsize(dtype: str) -> int | None:
    """Bytes per element of a dtype named as in keys ("float16", "torch.bfloat16"), or None."""
    found = getattr(torch, str(dtype).removeprefix("torch."), None)
    return found.itemsize if isinstance(found, torch.dtype) else None
