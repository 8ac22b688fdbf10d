"""Deployment tables at run time: tabled picks run with no tuning, for the exact key or the nearest."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kernelpick import settings
from kernelpick.errors import TableError
from kernelpick.store.keys import Toolchain, TuningKey, canonical_json
from kernelpick.store.table import DeploymentTable, TableEntry, read_table

log = logging.getLogger("kernelpick.store")


@dataclass(frozen=True, slots=True)
class TableHit:
    """A tabled pick for a call: the entry, its table, and how far its key is from the call's."""

    entry: TableEntry
    table: DeploymentTable
    distance: float  # 0.0 for the exact key

    @property
    def note(self) -> str:
        """For the tuning record: where the pick came from."""
        if self.distance == 0.0:
            return f"from the deployment table {self.table.label}"
        return (
            f"from the deployment table {self.table.label}, nearest key {list(self.entry.inputs)} "
            f"(distance {self.distance:.2f})"
        )


class Tables:
    """The deployment tables of this process, indexed by (kernel, source)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # reading the environment adds tables, under the same lock
        self._tables: list[DeploymentTable] = []
        self._index: dict[tuple[str, str], list[tuple[TableEntry, DeploymentTable]]] = {}
        self._exact: dict[str, tuple[TableEntry, DeploymentTable]] = {}
        self.refused: list[str] = []  # "path: why" of tables that do not apply here
        self._environment_read: str | None = None
        self._from_environment: list[DeploymentTable] = []  # replaced when KERNELPICK_TABLES changes

    def add(self, table: DeploymentTable) -> None:
        with self._lock:
            self._tables.append(table)
            self._add_to_index(table)

    def _add_to_index(self, table: DeploymentTable) -> None:
        for entry in table.entries:
            self._index.setdefault((entry.kernel, entry.source), []).append((entry, table))
            self._exact.setdefault(entry.key(table).digest, (entry, table))  # the first table wins

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()
            self._index.clear()
            self._exact.clear()
            self.refused.clear()
            self._environment_read = None
            self._from_environment.clear()

    @property
    def tables(self) -> list[DeploymentTable]:
        self._read_environment()
        return list(self._tables)

    def exact(self, key: TuningKey, usable: Callable[[TableEntry], bool]) -> TableHit | None:
        """The tabled pick for exactly this key, if it is usable."""
        self._read_environment()
        found = self._exact.get(key.digest)
        if found is None or not usable(found[0]):
            return None
        return TableHit(found[0], found[1], 0.0)

    def nearest(self, key: TuningKey, usable: Callable[[TableEntry], bool]) -> TableHit | None:
        """The usable tabled pick whose key is nearest this one (`key_distance`), if any is comparable."""
        self._read_environment()
        best: TableHit | None = None
        for entry, table in self._index.get((key.kernel, key.source), ()):
            if (table.device, table.capability, table.toolchain) != (
                key.device,
                key.capability,
                key.toolchain,
            ):
                continue
            distance = key_distance(key.inputs, entry.inputs)
            if distance is None or not usable(entry):
                continue
            if best is None or (distance, canonical_json(list(entry.inputs))) < (
                best.distance,
                canonical_json(list(best.entry.inputs)),
            ):
                best = TableHit(entry, table, distance)
        return best

    def _read_environment(self) -> None:
        paths = settings.current().tables
        if paths == self._environment_read:
            return
        with self._lock:  # tuned kernels in several threads may come here first at once
            if paths != self._environment_read:
                self._load_environment(paths)

    def _load_environment(self, paths: str) -> None:
        if self._from_environment:  # the setting changed: its earlier tables no longer apply
            gone = {id(t) for t in self._from_environment}
            self._tables = [t for t in self._tables if id(t) not in gone]
            self._index.clear()
            self._exact.clear()
            for table in self._tables:
                self._add_to_index(table)
            self._from_environment.clear()
            self.refused.clear()
        self._environment_read = paths
        here = _here()
        for path in filter(None, paths.split(":")):
            try:
                table = read_table(path)
            except TableError as error:
                self._refuse(path, str(error))
                continue
            why = table.mismatch(*here)
            if why is not None:
                self._refuse(path, f"made on {table.device}: {why}")
                continue
            self.add(table)
            self._from_environment.append(table)
            log.info("deployment table %s: %d picks for %s", path, len(table.entries), table.device)

    def _refuse(self, path: str, why: str) -> None:
        self.refused.append(f"{path}: {why}")
        log.warning("KERNELPICK_TABLES: %s does not apply here (%s)", path, why)


_tables = Tables()

_Candidate = TypeVar("_Candidate")


def tabled_pick(
    key: TuningKey,
    candidate_of: Callable[[TableEntry], _Candidate | None],
    stored_completely: Callable[[], bool],
) -> tuple[_Candidate, TableHit] | None:
    """The pick the deployment tables give for `key`, in the lookup order of docs/store.md's
    "Deployment tables": the exact key's; else, when `stored_completely()` says the store cannot answer alone, the
    nearest key's. `candidate_of` finds an entry's pick among the caller's candidates (None: it
    has none such, e.g. a config pruned away, and the entry is passed over).
    """
    if not _tables.tables:
        return None
    usable = lambda entry: candidate_of(entry) is not None  # noqa: E731
    hit = _tables.exact(key, usable)
    if hit is None and not stored_completely():
        hit = _tables.nearest(key, usable)
    if hit is None:
        return None
    candidate = candidate_of(hit.entry)
    assert candidate is not None  # usable
    return candidate, hit


def tables() -> Tables:
    """This process's deployment tables."""
    return _tables


def load_table(path: Path | str, *, check: bool = True) -> DeploymentTable:
    """Run the picks of a deployment table (from `kernelpick cache export`) with no tuning.

    Tuned kernels and selectors of this process take a tabled pick for a call's exact key, or for
    the nearest key when neither the store nor the table has the exact one (`key_distance`).

    Args:
        path: the table's JSON file.
        check: refuse a table made on another device model or under another toolchain than this
            process's default device and versions.

    Returns:
        The table.

    Raises:
        TableError: the file is not a table, or it was made elsewhere; the message names the field
            that differs (device model, compute capability, triton, torch or CUDA version).
    """
    table = read_table(path)
    if check:
        why = table.mismatch(*_here())
        if why is not None:
            raise TableError(
                f"deployment table {path} was made on {table.device} and does not apply here: {why}"
            )
    _tables.add(table)
    return table


def tuning_required(what: str, key: str, device: str, missing: int) -> str:
    """The message of `TuningRequired`: what had no pick, and what was looked at."""
    loaded = _tables.tables
    lines = [
        f"{what} has no pick for {key} on {device}, and KERNELPICK_NO_TUNING=1 forbids tuning at run "
        f"time ({missing} candidates would be measured)",
        "  deployment tables: "
        + (", ".join(f"{t.label} ({len(t.entries)} picks)" for t in loaded) or "none loaded")
        + "; none has this key or a comparable one",
    ]
    lines += [f"  refused: {why}" for why in _tables.refused]
    lines.append(
        "  tune ahead of time (`kernelpick tune SPEC.py --export table.json`) and load the table "
        "(KERNELPICK_TABLES=table.json or kernelpick.load_table), or unset KERNELPICK_NO_TUNING"
    )
    return "\n".join(lines)


def key_distance(wanted: Any, tabled: Any) -> float | None:
    """How far a tabled key is from a wanted one; None when they are not comparable.

    Keys are comparable when they have the same structure (lists of the same lengths, objects with
    the same fields) and equal non-numeric values (dtypes, names, flags). The distance sums, over the
    numeric values, |log2(1 + |a|) - log2(1 + |b|)|: sizes are compared by ratio, so M = 100 is
    nearer M = 128 than M = 64, and a difference at M = 16 weighs more than the same one at M = 4096.
    """
    total = 0.0
    for a, b in _pairs(wanted, tabled):
        if a is _MISMATCH:
            return None
        total += abs(math.log2(1 + abs(a)) - math.log2(1 + abs(b)))
    return total


_MISMATCH = object()


def _pairs(a: Any, b: Any) -> Iterator[tuple[Any, Any]]:
    """(a, b) for each pair of numbers at the same place in two keys; (_MISMATCH, None) where they differ otherwise."""
    if _number(a) and _number(b):
        yield a, b
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            yield _MISMATCH, None
            return
        for x, y in zip(a, b):
            yield from _pairs(x, y)
    elif isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            yield _MISMATCH, None
            return
        for name in a:
            yield from _pairs(a[name], b[name])
    elif type(a) is not type(b) or a != b:
        yield _MISMATCH, None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _here() -> tuple[str, str, Toolchain]:
    """This process's default device model (a GPU's when there is one), capability and toolchain."""
    import torch

    from kernelpick.device import describe

    device = describe(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    return device.name, device.capability_text, Toolchain.current()
