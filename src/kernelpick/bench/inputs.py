"""Benchmark inputs: private copies of every argument a kernel may write, restored before each run.

The user's tensors are never written while tuning. Copies are made per storage, so arguments that
alias each other (two views of one buffer) alias each other in the copies too. A copy is restored
before each run only when the kernel may also read its storage: what a kernel only writes cannot
change what it computes, so restoring it would only add memory traffic to the measurement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

import torch


def _flat_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The whole storage behind `tensor`, as a 1-D uint8 tensor."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())


def tensor_of(value: Any) -> torch.Tensor | None:
    """The tensor an argument reads or writes: the tensor itself, or a tensor descriptor's base."""
    if isinstance(value, torch.Tensor):
        return value
    base = getattr(value, "base", None)  # triton.tools.tensor_descriptor.TensorDescriptor
    if dataclasses.is_dataclass(value) and isinstance(base, torch.Tensor):
        return base
    return None


def _view_into(storage_bytes: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A tensor over `storage_bytes` with `like`'s dtype, size, strides and offset."""
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(
        storage_bytes.untyped_storage(), like.storage_offset(), like.size(), like.stride()
    )


class ScratchArguments:
    """Launch arguments in which the tensors a kernel may write are replaced by scratch copies.

    Args:
        arguments: the launch's arguments by name.
        written: names of arguments the kernel may write (all tensors, when unsure).
        zeroed: names of arguments to zero before each run instead of restoring (`reset_to_zero`).
        read: names of arguments the kernel may read (None: all of them). A written storage that no
            read argument shares is copied once and never restored.
    """

    def __init__(
        self,
        arguments: Mapping[str, Any],
        written: Collection[str],
        zeroed: Collection[str] = (),
        read: Collection[str] | None = None,
    ) -> None:
        self._pairs: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}
        for name in (*written, *zeroed):
            value = tensor_of(arguments.get(name))
            if value is not None and value.untyped_storage().nbytes() > 0:
                key = (value.untyped_storage().data_ptr(), value.device)
                if key not in self._pairs:
                    original = _flat_bytes(value)
                    self._pairs[key] = (original, original.clone())
        read_storages = {
            (tensor.untyped_storage().data_ptr(), tensor.device)
            for name, value in arguments.items()
            if (read is None or name in read) and (tensor := tensor_of(value)) is not None
        }
        self._restored = [pair for key, pair in self._pairs.items() if key in read_storages]
        # Every tensor over a copied storage, read-only ones and descriptors' bases included, now
        # points at the copy.
        self.arguments: dict[str, Any] = {}
        for name, value in arguments.items():
            tensor = tensor_of(value)
            if tensor is not None:
                pair = self._pairs.get((tensor.untyped_storage().data_ptr(), tensor.device))
                if pair is not None:
                    copy = _view_into(pair[1], tensor)
                    value = copy if value is tensor else dataclasses.replace(value, base=copy)
            self.arguments[name] = value
        self._zeroed = [t for t in map(tensor_of, (self.arguments.get(n) for n in zeroed)) if t is not None]

    @property
    def copied_bytes(self) -> int:
        return sum(scratch.numel() for _, scratch in self._pairs.values())

    @property
    def restored_bytes(self) -> int:
        """Bytes copied back before each run."""
        return sum(scratch.numel() for _, scratch in self._restored)

    def restore(self) -> None:
        """Give every copy the kernel may read the user's values again (and zero the `zeroed` ones)."""
        for original, scratch in self._restored:
            scratch.copy_(original)
        for tensor in self._zeroed:
            tensor.zero_()
