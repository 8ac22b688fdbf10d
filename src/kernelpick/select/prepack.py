"""Pre-packed tensors, made once per tensor and reused while that tensor is unchanged."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


def version_of(tensor: torch.Tensor) -> int:
    """The tensor's in-place version counter (-1 for inference tensors, which keep none)."""
    try:
        return int(tensor._version)
    except RuntimeError:  # "Inference tensors do not track version counter"
        return -1


@dataclass(frozen=True, slots=True)
class _Entry:
    source: weakref.ReferenceType[torch.Tensor]
    version: int
    data_ptr: int
    packed: Any


def _holds(entry: _Entry, tensor: torch.Tensor) -> bool:
    """Whether `entry` was packed from `tensor` as it is now."""
    return (
        entry.source() is tensor
        and entry.version == version_of(tensor)
        and entry.data_ptr == tensor.data_ptr()
    )


class PrepackCache:
    """`pack(tensor)` made once per tensor and version; `get` is what a call runs.

    Args:
        pack: makes the packed form of one tensor; it is not timed when choices are benchmarked.
    """

    def __init__(self, pack: Callable[[torch.Tensor], Any]) -> None:
        self.pack = pack
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, tensor: torch.Tensor) -> Any:
        """The packed form of `tensor`, packed now if it never was or changed since."""
        entry = self._entries.get(id(tensor))
        if entry is not None and _holds(entry, tensor):
            return entry.packed
        with self._lock:  # one pack per tensor, even when several choices' threads ask at once
            entry = self._entries.get(id(tensor))
            if entry is not None and _holds(entry, tensor):
                return entry.packed
            version, pointer = version_of(tensor), tensor.data_ptr()
            packed = self.pack(tensor)
            self._entries[id(tensor)] = _Entry(self._source_ref(tensor), version, pointer, packed)
            return packed

    def _source_ref(self, tensor: torch.Tensor) -> weakref.ReferenceType[torch.Tensor]:
        key, entries = id(tensor), self._entries

        def forget(ref: weakref.ReferenceType[torch.Tensor]) -> None:
            # Only this tensor's entry: a new tensor may already have the dead one's id.
            entry = entries.get(key)
            if entry is not None and entry.source is ref:
                entries.pop(key, None)

        return weakref.ref(tensor, forget)

    def __len__(self) -> int:
        """How many tensors have a packed form kept."""
        return len(self._entries)
