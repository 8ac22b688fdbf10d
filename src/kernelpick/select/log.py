"""The tuning log (`KERNELPICK_LOG`): one JSON line a tuning, appended safely from any thread or process."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.console import headline, print_table, warn_once
from kernelpick.errors import ReportError
from kernelpick.select.record import TuningRecord
from kernelpick.select.work import work_of
from kernelpick.store.keys import Toolchain, canonical_json, canonical_value
from kernelpick.store.text import notable_specialization

log = logging.getLogger("kernelpick.reports")

#: The version of the line format; a reader skips lines of a version it does not know.
LOG_VERSION = 1


def report_tuning(record: TuningRecord, *, table: bool = True) -> None:
    """A finished tuning's table, printed where `table` and `KERNELPICK_PRINT` say so, and its log line."""
    if table and settings.current().print_tables:
        print_table(record.table())
    log_tuning(record)


def log_tuning(record: TuningRecord) -> None:
    """Append one JSON line describing `record` to the file `KERNELPICK_LOG` names; nothing when unset.

    Never raises into the caller: a log that cannot be written costs one warning per path.

    Args:
        record: what one tuning of a kernel (`autotune`) or a selector found.
    """
    path = settings.current().log_path
    if path is None:
        return
    try:
        append_line(path, json.dumps(tuning_entry(record), default=str, allow_nan=False))
    except Exception as error:  # a log must never fail the user's call
        warn_once(
            log,
            f"tuning log {path}",
            "kernelpick: the tuning log %s cannot be written (%s); tunings are not logged",
            path,
            error,
        )


def tuning_entry(record: TuningRecord) -> dict[str, Any]:
    """The plain data of one log line (docs/reports.md, "The log's lines", lists its fields)."""
    candidates = [candidate_entry(r.name, r.description, r.result) for r in record.candidates]
    extra: dict[str, Any] = {"phases": dict(record.phases)}
    key_text = record.key_text
    if record.signature is not None:  # a selector's
        signature = record.signature.to_data()
        key = selection_key(signature)
        key_inputs: Any = canonical_value(signature)
        extra["reference"] = record.reference
        if record.searches:
            extra["searches"] = record.searches_to_dict()
    else:  # a tuned kernel's: its key names, dtypes and specialization (`kernelpick.tune.dispatch`)
        values = record.key[:-1]  # the last value is the device
        names = list(record.key_names)[: len(values)]
        key = {n: canonical_value(v) for n, v in zip(names, values)}
        rest = values[len(names) :]
        key["dtypes"] = [str(v).removeprefix("torch.") for v in rest if not isinstance(v, str)]
        key["specialized"] = next((v for v in rest if isinstance(v, str)), "")
        notable = notable_specialization(key["specialized"])
        shown = [f"{n}={v}" for n, v in zip(names, values)] + key["dtypes"] + ([notable] if notable else [])
        key_text = "(" + ", ".join(shown) + ")"
        key_inputs = canonical_value(values)
        if record.search is not None:
            extra["search"] = record.search.to_dict()
    entry: dict[str, Any] = {
        "version": LOG_VERSION,
        "time": time.time(),
        "pid": os.getpid(),
        "kind": record.kind,
        "name": record.name,
        "key": key,
        "key_text": key_text,
        "key_inputs": json.loads(canonical_json(key_inputs)),
        "device": record.device.name,
        "capability": record.device.capability_text or None,
        "interpreter": record.device.interpreter,
        "toolchain": asdict(Toolchain.current()),
        "seconds": record.seconds,
        "from_store": record.from_store,
        "note": record.note,
        "best": record.best_name,
        **extra,
        "candidates": candidates,
    }
    flops, moved = work_of(record.name, key)
    if flops is not None:
        entry["flops"] = flops
    if moved is not None:
        entry["bytes"] = moved
    return entry


def candidate_entry(name: str, description: Mapping[str, Any], result: BenchmarkResult) -> dict[str, Any]:
    """One candidate of a log line: its name and description, status, timing figures and reason."""
    return {
        "name": name,
        "description": dict(description),
        "status": result.status,
        "cost_ms": result.cost_ms if result.ok else None,
        "timing": None if result.timing is None else result.timing.to_dict(),
        "message": headline(result.message, 300),
        "from_store": result.from_store,
        "compile_s": result.compile_s,
    }


def selection_key(signature: Sequence[Any]) -> dict[str, Any]:
    """A selector's key as work functions and reports see it, from `Signature.to_data()` (or a store
    key's inputs): positional `inputs` (a tensor as {dtype, size, stride, offset}), `kwargs` and the
    selector's own `user_key`."""
    inputs, kwargs, user_key = [*signature, [], [], None][:3]
    return {"inputs": list(inputs), "kwargs": {str(k): v for k, v in kwargs}, "user_key": user_key}


def append_line(path: Path, line: str) -> None:
    """Append `line` and a newline to `path` as one write under an exclusive lock, creating the file.

    Lines from threads and processes appending at once never interleave: the file is opened with
    O_APPEND and the whole line goes in one `write` while `flock` is held (where the system has it).
    """
    data = (line.rstrip("\n") + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _lock(descriptor)
        written = 0
        while written < len(data):
            written += os.write(descriptor, data[written:])
    finally:
        os.close(descriptor)  # closing releases the lock


def _lock(descriptor: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: O_APPEND alone
        return
    fcntl.flock(descriptor, fcntl.LOCK_EX)


def read_log(path: Path) -> list[dict[str, Any]]:
    """Every line of the tuning log at `path`, oldest first.

    A line that is not a JSON object of a known version (a line cut short by a crash, or text
    written by something else) is left out, with one warning saying how many were.

    Raises:
        ReportError: no file at `path`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ReportError(
            f"no tuning log at {path}: set KERNELPICK_LOG=<path> while tuning to write one, or pass "
            "the path of an existing log"
        ) from None
    entries, skipped = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if (
            isinstance(entry, dict)
            and entry.get("version") == LOG_VERSION
            and isinstance(entry.get("candidates"), list)
        ):
            entries.append(entry)
        else:
            skipped += 1
    if skipped:
        log.warning("%s: %d lines that are not kernelpick tuning log lines were left out", path, skipped)
    return entries
