"""`KERNELPICK_RECORD`: the keys a run meets, appended to a file as calls, and the calls made again."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from kernelpick.calls.origins import origin, resolve
from kernelpick.calls.values import Unrecordable, decode, encode, grid_data, grid_of
from kernelpick.errors import ConfigError
from kernelpick.files import lock_exclusively, write_all
from kernelpick.tensors import example_generator

log = logging.getLogger("kernelpick.record")

#: The version of the line format; a reader refuses lines of a version it does not know.
RECORDING_VERSION = 1

_warned: set[object] = set()
_lock = threading.Lock()


def record_kernel_call(
    path: Path, kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any], key: tuple[Any, ...], grid: Any
) -> None:
    """Record the call of a tuned kernel (`kernelpick.autotune`) whose `key` this process meets for
    the first time in the file at `path` (`KERNELPICK_RECORD`, which the caller read). Never raises."""
    _record(path, "autotune", kernel, args, kwargs, key, grid)


def record_selector_call(
    path: Path, selector: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any], key: tuple[Any, ...]
) -> None:
    """Record the call of a selector whose signature `key` this process meets for the first time in
    the file at `path` (`KERNELPICK_RECORD`, which the caller read). Never raises."""
    _record(path, "select", selector, inputs, kwargs, key, None)


def _record(
    path: Path,
    kind: str,
    target: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    key: tuple[Any, ...],
    grid: Any,
) -> None:
    label = str(getattr(target, "name", None) or getattr(target, "__name__", None) or type(target).__name__)
    try:
        found = origin(target)
        if found is None:
            _warn_once(
                id(target),
                f"kernelpick: {label} cannot be recorded (KERNELPICK_RECORD): no module binds it to a "
                "name, so another process cannot find it (made inside a function, or in `python -c` or "
                f"a notebook); its keys are left out of {path}. Bind it to a name at a module's top level",
            )
            return
        factory, factory_args, folder = found
        digest = _digest([kind, factory, factory_args, _plain(key)])
        recorder = _recorder(path)
        if recorder.has(digest):
            return
        entry: dict[str, Any] = {
            "version": RECORDING_VERSION,
            "kind": kind,
            "job": "",
            "key": digest,
            "target": factory,
        }
        if factory_args:
            entry["target_args"] = factory_args
        if folder is not None:
            entry["path"] = folder
        entry["args"] = [encode(value, f"argument {i}") for i, value in enumerate(args)]
        entry["kwargs"] = {name: encode(value, f"argument `{name}`") for name, value in kwargs.items()}
        if kind == "autotune":
            entry["grid"] = grid_data(target, args, kwargs, grid)
        entry["job"] = f"{label}({_describe(entry['args'], entry['kwargs'])}) {digest[:12]}"
        entry["device"] = _device_type(args, kwargs)
        entry["time"], entry["pid"] = time.time(), os.getpid()
        recorder.append(digest, json.dumps(entry))
    except Unrecordable as why:
        _warn_once(
            id(target),
            f"kernelpick: calls of {label} cannot be recorded (KERNELPICK_RECORD): {why}, which a "
            f"recording cannot make again; its keys are left out of {path}",
        )
    except Exception as error:  # recording must never fail the user's call
        _warn_once(
            str(path),
            f"kernelpick: the recording {path} cannot be written ({error}); keys are not recorded",
        )


def _warn_once(what: object, message: str) -> None:
    with _lock:
        if what in _warned:
            return
        _warned.add(what)
    log.warning(message)


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _plain(value: Any) -> Any:
    """A tuning key as plain data for its digest: a device by its type (a key met on cuda:0 and
    cuda:1 is one key), dtypes by name, sequences as lists."""
    if isinstance(value, torch.device):
        return value.type
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return f"{type(value).__qualname__}:{value}"


def _device_type(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device.type
    return "cpu"


def _describe(args: list[Any], kwargs: dict[str, Any]) -> str:
    """The arguments for people: "float32[8, 64], 64, BLOCK=16", cut at 120 characters."""

    def one(data: Any) -> str:
        if isinstance(data, dict) and "tensor" in data:
            spec = data["tensor"]
            return f"{spec['dtype']}{spec['size']}"
        if isinstance(data, dict) and "tuple" in data:
            return "(" + ", ".join(map(one, data["tuple"])) + ")"
        if isinstance(data, dict) and "dataclass" in data:
            return str(data["dataclass"]).rpartition(":")[2]
        if isinstance(data, dict):
            return str(next(iter(data.values()), ""))
        return repr(data)

    text = ", ".join([*map(one, args), *(f"{name}={one(v)}" for name, v in kwargs.items())])
    return text if len(text) <= 120 else text[:117] + "..."


# -- calling again ------------------------------------------------------------------------------


def replay_call(entry: Mapping[str, Any], device: torch.device) -> object:
    """Make a recorded call again on `device`, on example inputs: a tuned kernel is launched (tuning
    its key first), a selector tunes (`Selector.tune`).

    Raises:
        ConfigError: its kernel or selector cannot be found, or is not of the kind recorded.
    """
    target = resolve(entry["target"], entry.get("target_args", ()), entry.get("path"))
    generator = example_generator(device)
    args = [decode(value, device, generator) for value in entry["args"]]
    kwargs = {name: decode(value, device, generator) for name, value in entry["kwargs"].items()}
    if entry["kind"] == "autotune":
        if not (hasattr(target, "configs") and hasattr(target, "__getitem__")):
            raise ConfigError(
                f"{entry['target']} is a {type(target).__name__}, not a kernelpick.autotune kernel"
            )
        return target[grid_of(entry["grid"])](*args, **kwargs)
    tune: Callable[..., object] | None = getattr(target, "tune", None)
    if tune is None:
        raise ConfigError(f"{entry['target']} is a {type(target).__name__}, not a kernelpick.Selector")
    return tune(*args, **kwargs)


# -- the file -----------------------------------------------------------------------------------


class _Recorder:
    """The keys of one recording file, appended once each from any thread or process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: set[str] = set()
        self.read_up_to = 0  # bytes of the file read into `seen`
        self._lock = threading.Lock()

    def has(self, digest: str) -> bool:
        return digest in self.seen

    def append(self, digest: str, line: str) -> None:
        """Append `line` unless a line of `digest` is in the file: under an exclusive `flock` (where
        the system has it), the lines other processes appended since the last look are read first,
        and the line goes in one `write` of an O_APPEND file."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                lock_exclusively(descriptor)
                size = os.fstat(descriptor).st_size
                ends_cut = self._read_new(descriptor, size)
                if digest in self.seen:
                    return
                data = (("\n" if ends_cut else "") + line + "\n").encode()
                write_all(descriptor, data)
                self.read_up_to = size + len(data)
                self.seen.add(digest)
            finally:
                os.close(descriptor)  # closing lets go of the lock

    def _read_new(self, descriptor: int, size: int) -> bool:
        """Read the whole lines past `read_up_to` into `seen`; whether the file ends in a line cut
        short (by a killed writer), which the next line must not be glued to."""
        if size < self.read_up_to:  # the file was emptied or replaced: read it again
            self.seen.clear()
            self.read_up_to = 0
        if size == self.read_up_to:
            return False
        text = os.pread(descriptor, size - self.read_up_to, self.read_up_to)
        whole = text.rfind(b"\n") + 1
        for line in text[:whole].splitlines():
            digest = _line_key(line)
            if digest is not None:
                self.seen.add(digest)
        self.read_up_to += whole
        return whole < len(text)


def _line_key(line: bytes) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    key = entry.get("key") if isinstance(entry, dict) else None
    return key if isinstance(key, str) else None


_recorders: dict[Path, _Recorder] = {}


def _recorder(path: Path) -> _Recorder:
    with _lock:
        found = _recorders.get(path)
        if found is None:
            found = _recorders[path] = _Recorder(path)
        return found


# -- reading ------------------------------------------------------------------------------------


def read_recording(path: Path | str) -> list[dict[str, Any]]:
    """The calls of a recording, each key once, in the order they were met.

    A line that is not a call of a known version (cut short by a killed process, or written by
    something else) is left out, with one warning saying how many were.

    Raises:
        ConfigError: the file does not exist, or holds no call.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"no recording at {path}: run the program with KERNELPICK_RECORD={path}") from None
    entries: dict[str, dict[str, Any]] = {}
    skipped = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if _well_formed(entry):
            entries.setdefault(entry["key"], entry)
        else:
            skipped += 1
    if skipped:
        log.warning("%s: %d lines that are not recorded calls were left out", path, skipped)
    if not entries:
        raise ConfigError(
            f"the recording {path} holds no call: run the program with KERNELPICK_RECORD={path} first"
        )
    return list(entries.values())


def _well_formed(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and entry.get("version") == RECORDING_VERSION
        and entry.get("kind") in ("autotune", "select")
        and all(isinstance(entry.get(k), str) for k in ("job", "key", "target"))
        and isinstance(entry.get("args"), list)
        and isinstance(entry.get("kwargs"), dict)
        and (entry["kind"] == "select" or isinstance(entry.get("grid"), (list, dict)))
    )
