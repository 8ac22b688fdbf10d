"""The kernel side table: graphs hold integer ids; the kernels and constants they stand for live here."""

from __future__ import annotations

import struct
import threading
from collections.abc import Hashable
from typing import Any

from kernelpick.errors import OperatorError


class SideTable:
    """Kernels and constants by integer id, and ids by kernel or constant.

    Kernels are keyed by identity (two kernels with equal source are two entries). Constants are
    keyed by value when hashable (so a graph traced twice holds the same ids), by identity
    otherwise. Every entry is kept alive by the table, so an id never comes to name a new object.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kernels: list[Any] = []
        self._kernel_ids: dict[int, int] = {}  # id(kernel) -> index; the list keeps the kernel alive
        self._constants: list[Any] = []
        self._constant_ids: dict[Hashable, int] = {}

    def add_kernel(self, kernel: Any) -> int:
        """The id of `kernel`, added on first sight (thread-safe)."""
        found = self._kernel_ids.get(id(kernel))
        if found is not None:
            return found
        with self._lock:
            found = self._kernel_ids.get(id(kernel))
            if found is None:
                found = len(self._kernels)
                self._kernels.append(kernel)
                self._kernel_ids[id(kernel)] = found
            return found

    def kernel(self, kernel_id: int) -> Any:
        """The kernel with id `kernel_id`.

        Raises:
            OperatorError: no kernel has this id in this process (a graph traced in another process).
        """
        try:
            return self._kernels[kernel_id]
        except (IndexError, TypeError):
            raise OperatorError(
                f"no kernel has id {kernel_id!r} in kernelpick's side table ({len(self._kernels)} kernels "
                "are known); kernel ids are valid only in the process that traced the graph, so trace "
                "it again in this process"
            ) from None

    def kernel_id(self, kernel: Any) -> int | None:
        """The id of `kernel` if it was added, else None."""
        return self._kernel_ids.get(id(kernel))

    def add_constant(self, value: Any) -> int:
        """The id of `value`, added on first sight (thread-safe); equal hashable values share an id."""
        key = _constant_key(value)
        found = self._constant_ids.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._constant_ids.get(key)
            if found is None:
                found = len(self._constants)
                self._constants.append(value)
                self._constant_ids[key] = found
            return found

    def constant(self, constant_id: int) -> Any:
        """The constant with id `constant_id`.

        Raises:
            OperatorError: no constant has this id in this process.
        """
        try:
            return self._constants[constant_id]
        except (IndexError, TypeError):
            raise OperatorError(
                f"no constant has id {constant_id!r} in kernelpick's side table ({len(self._constants)} "
                "constants are known); ids are valid only in the process that traced the graph"
            ) from None

    def sizes(self) -> tuple[int, int]:
        """How many kernels and constants the table holds."""
        return len(self._kernels), len(self._constants)


def _constant_key(value: Any) -> Hashable:
    """A key under which equal constants meet: by value and type when hashable, else by identity.

    Types are part of the key so that `1`, `1.0` and `True` stay apart, and floats are keyed by
    their bits so that `0.0` and `-0.0` do too.
    """
    try:
        return ("value", _canonical(value))
    except TypeError:
        return ("identity", id(value))


def _canonical(value: Any) -> Hashable:
    if isinstance(value, float):
        return (float, struct.pack("<d", value))
    if type(value) is tuple:
        return (tuple, tuple(_canonical(v) for v in value))
    hash(value)  # raises TypeError for unhashable values
    return (type(value), value)


#: The process-wide table every traced kernelpick launch refers to.
side_table = SideTable()
