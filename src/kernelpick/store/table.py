"""Deployment tables: the pick of every tuned key for one device model, as JSON people read and diff."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelpick.bench.result import BenchmarkResult
from kernelpick.errors import TableError
from kernelpick.store.base import CandidateResult, StoredRow, parse_result
from kernelpick.store.keys import MAX_NESTING, Toolchain, TuningKey, canonical_json, nesting

FORMAT_VERSION = 1
#: Larger files are refused unread: a table is a few kB per tuned key.
MAX_TABLE_BYTES = 64 * 2**20


@dataclass(frozen=True, slots=True)
class TableEntry:
    """The pick of one tuned key."""

    kernel: str  # the tuned kernel's or selector's name
    source: str  # the hash of its source (and measurement version), as in the store key
    inputs: tuple[Any, ...]  # the key values, as in the store key
    candidate: str  # the pick's digest
    choice: Mapping[str, Any]  # the pick as plain data: a config's values, a choice's name
    result: BenchmarkResult  # how it did when it was tuned

    def key(self, table: DeploymentTable) -> TuningKey:
        """The store key this entry was tuned under."""
        return TuningKey(
            self.kernel, self.source, table.device, table.capability, table.toolchain, self.inputs
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "source": self.source,
            "inputs": list(self.inputs),
            "candidate": self.candidate,
            "choice": dict(self.choice),
            "result": self.result.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class DeploymentTable:
    """Winners tuned on one device model under one toolchain."""

    device: str  # the device model, e.g. "NVIDIA H100 80GB HBM3"
    capability: str  # e.g. "9.0"; "" on CPUs
    toolchain: Toolchain
    entries: tuple[TableEntry, ...]
    created: str = ""  # ISO time it was exported
    path: Path | None = None  # where it was read from

    @property
    def label(self) -> str:
        return str(self.path) if self.path is not None else f"table for {self.device}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernelpick_table": FORMAT_VERSION,
            "device": self.device,
            "capability": self.capability,
            "toolchain": {
                "triton": self.toolchain.triton,
                "torch": self.toolchain.torch,
                "cuda": self.toolchain.cuda,
            },
            "created": self.created,
            "entries": [e.to_dict() for e in self.entries],
        }

    def write(self, path: Path | str) -> Path:
        """Write the table as indented JSON (entries in a stable order, so that tables diff well)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")
        temporary.replace(path)  # readers never see half a table
        return path

    def mismatch(self, device: str, capability: str, toolchain: Toolchain) -> str | None:
        """Why this table does not apply to that device and toolchain (None when it does)."""
        theirs = {
            "device model": self.device,
            "compute capability": self.capability,
            "triton version": self.toolchain.triton,
            "torch version": self.toolchain.torch,
            "CUDA version": self.toolchain.cuda,
        }
        ours = {
            "device model": device,
            "compute capability": capability,
            "triton version": toolchain.triton,
            "torch version": toolchain.torch,
            "CUDA version": toolchain.cuda,
        }
        for field_name, value in theirs.items():
            if ours[field_name] != value:
                return f"its {field_name} is {value!r}, here it is {ours[field_name]!r}"
        return None

    def stored(self) -> list[tuple[TuningKey, CandidateResult]]:
        """Each entry as a store row: what `kernelpick cache import` saves (with the entry as its key's pick)."""
        return [(e.key(self), CandidateResult(e.candidate, e.choice, e.result)) for e in self.entries]


def export_table(
    rows: Iterable[StoredRow], *, device: str | None = None, toolchain: Toolchain | None = None
) -> DeploymentTable:
    """The pick of every key stored for one device model and toolchain.

    The pick is the candidate the last finished tuning of the key ran. Keys with no pick are
    left out: their tuning was interrupted (it stores each result as it is measured, and the pick
    once it has picked: its best among what it measured could be any), or nothing worked.

    Args:
        rows: stored results, e.g. `SQLiteStore.rows()`.
        device: the device model (default: the only one among the rows).
        toolchain: the toolchain (default: the only one among the rows of that device, else this
            process's, if present).

    Raises:
        TableError: nothing is stored for that device; several device models or toolchains are
            stored and none was named (the message lists them).
    """
    rows = list(rows)
    devices = sorted({r.key.device for r in rows})
    if device is None:
        if len(devices) != 1:
            raise TableError(
                "no results stored: nothing to export"
                if not devices
                else f"results of {len(devices)} device models are stored ({', '.join(devices)}): name one"
            )
        device = devices[0]
    rows = [r for r in rows if r.key.device == device]
    if not rows:
        raise TableError(f"no results stored for device {device!r}; stored: {', '.join(devices) or 'none'}")
    toolchains = sorted({r.key.toolchain for r in rows}, key=repr)
    if toolchain is None:
        if len(toolchains) == 1:
            toolchain = toolchains[0]
        elif Toolchain.current() in toolchains:
            toolchain = Toolchain.current()
        else:
            listed = "; ".join(t.describe() for t in toolchains)
            raise TableError(
                f"results of {device} under {len(toolchains)} toolchains are stored ({listed}): name one"
            )
    rows = [r for r in rows if r.key.toolchain == toolchain]
    if not rows:
        raise TableError(f"no results stored for {device} under {toolchain.describe()}")

    by_key: dict[str, list[StoredRow]] = {}
    for row in rows:
        by_key.setdefault(row.key.digest, []).append(row)
    entries = []
    for key_rows in by_key.values():
        picked = [r for r in key_rows if r.picked and r.result.ok]
        if not picked:
            continue
        best = picked[0]
        key = best.key
        entries.append(
            TableEntry(
                key.kernel,
                key.source,
                key.inputs,
                best.candidate,
                best.description,
                _plain(best.result),
            )
        )
    entries.sort(key=lambda e: (e.kernel, canonical_json(list(e.inputs)), e.source))
    first = rows[0].key
    created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    return DeploymentTable(device, first.capability, toolchain, tuple(entries), created)


def read_table(path: Path | str) -> DeploymentTable:
    """Read and check a table file.

    Raises:
        TableError: the file is missing, too large, not JSON, or not a kernelpick table; the message
            names the file and what is wrong.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise TableError(f"cannot read the deployment table {path}: {error.strerror}") from None
    if size > MAX_TABLE_BYTES:
        raise TableError(f"deployment table {path} is {size} bytes; at most {MAX_TABLE_BYTES} are read")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TableError(f"deployment table {path} is not JSON: {error}") from None
    except RecursionError:
        raise TableError(f"deployment table {path} is JSON nested too deep to read") from None
    try:
        return table_from_dict(data, path)
    except (KeyError, TypeError, ValueError) as error:
        raise TableError(f"{path} is not a kernelpick deployment table: {str(error)[:300]}") from None
    except RecursionError:
        raise TableError(f"{path} is not a kernelpick deployment table: nested too deep") from None


def table_from_dict(data: Any, path: Path | None = None) -> DeploymentTable:
    """Check and convert a table's JSON data: every field of its type, each pick's result as a
    store's row is checked (`kernelpick.store.base.parse_result`: finite positive times, status `ok`).

    Raises:
        ValueError, KeyError, TypeError: the data is not a table of this format version.
    """
    if not isinstance(data, dict) or "kernelpick_table" not in data:
        raise ValueError("no 'kernelpick_table' format field")
    if data["kernelpick_table"] != FORMAT_VERSION:
        raise ValueError(
            f"format version {data['kernelpick_table']!r}; this kernelpick reads version {FORMAT_VERSION}"
        )
    toolchain = data["toolchain"]
    cuda = toolchain["cuda"]
    if cuda is not None and not isinstance(cuda, str):
        raise TypeError(f"toolchain.cuda is {cuda!r}")
    entries = []
    for number, entry in enumerate(_list(data["entries"], "entries")):
        if not isinstance(entry, dict):
            raise TypeError(f"entry {number} is {type(entry).__name__}, not an object")
        choice = entry["choice"]
        if not isinstance(choice, dict):
            raise TypeError(f"entry {number}: choice is {type(choice).__name__}, not an object")
        if nesting(choice) > MAX_NESTING or nesting(entry["inputs"]) > MAX_NESTING:
            raise ValueError(f"entry {number}: its choice or inputs are nested over {MAX_NESTING} deep")
        try:
            result = replace(parse_result(entry["result"]), from_store=False)
        except ValueError as error:
            raise ValueError(f"entry {number}: {error}") from None
        if not result.ok:
            raise ValueError(f"entry {number}: its pick has status {result.status!r}")
        entries.append(
            TableEntry(
                _text(entry["kernel"], "kernel"),
                _text(entry["source"], "source"),
                tuple(_list(entry["inputs"], "inputs")),
                _text(entry["candidate"], "candidate"),
                choice,
                result,
            )
        )
    table = DeploymentTable(
        _text(data["device"], "device"),
        _text(data["capability"], "capability"),
        Toolchain(_text(toolchain["triton"], "triton"), _text(toolchain["torch"], "torch"), cuda),
        tuple(entries),
        str(data.get("created", "")),
        path,
    )
    return table


def _plain(result: BenchmarkResult) -> BenchmarkResult:
    return BenchmarkResult.from_dict(result.to_dict())  # drops `from_store`: a table row is a record


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} is {value!r}, not a string")
    return value


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{name} is {type(value).__name__}, not a list")
    return value
