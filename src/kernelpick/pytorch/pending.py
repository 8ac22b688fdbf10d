"""`torch.ops.<namespace>.<name>` of a `kernelpick.op` not registered yet: an error that says why."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

from kernelpick.console import warn_once
from kernelpick.errors import OperatorNotRegistered

log = logging.getLogger("kernelpick.pytorch")

_lock = threading.Lock()
#: "namespace::name" -> why that operator is not registered yet (None once it is).
_pending: dict[str, Callable[[], str | None]] = {}


class _Namespace(torch._ops._OpNamespace):
    """`torch.ops.<namespace>` of a namespace holding `kernelpick.op`s.

    A `kernelpick.op` becomes a PyTorch operator at its first call (or `register`, or
    `example_inputs=`), once a recorded call has shown which inputs its kernels write; until then
    PyTorch knows no such operator, and a lookup of it says so and what to do. Other names, and this
    one once registered, are looked up as PyTorch does.
    """

    # PyTorch names the operators it finds after the namespace's module (Inductor finds them by it).
    __module__ = torch._ops._OpNamespace.__module__

    def __getattr__(self, op_name: str) -> Any:
        try:
            return super().__getattr__(op_name)
        except AttributeError:  # PyTorch knows no such operator (yet): say why, when it is ours
            why = _pending.get(f"{self.name}::{op_name}")
            message = why() if why is not None else None
            if message is None:
                raise
        # Also logged: a lookup through `hasattr` (torch.export.load's) swallows the error itself.
        warn_once(log, message, "%s", message)
        raise OperatorNotRegistered(message)


def watch(namespace: str, name: str, why_not_registered: Callable[[], str | None]) -> None:
    """Make `torch.ops.<namespace>.<name>` raise `OperatorNotRegistered` while `why_not_registered()`
    says why (it returns None once the operator is registered)."""
    with _lock:
        _pending[f"{namespace}::{name}"] = why_not_registered
        space = getattr(torch.ops, namespace)
        if isinstance(space, torch._ops._OpNamespace) and not isinstance(space, _Namespace):
            space.__class__ = _Namespace
