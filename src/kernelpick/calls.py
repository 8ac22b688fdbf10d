"""Tuned calls as data: the keys a run meets, recorded with `KERNELPICK_RECORD`, and made again.

With `KERNELPICK_RECORD=keys.jsonl`, the first call of each key in a process (whether it is then
tuned, read from the store or from a table) appends one JSON line to that file: which tuned kernel
or selector was called, found again by import path, and the call's arguments as data, tensors by
their metadata. `kernelpick tune keys.jsonl` makes each call again on example inputs, on the device
it tunes on, and so tunes every key the run met. Nothing is done for a key a process has met
already: recording happens where a key is first met, never on the hot path.

A line is one JSON object:

- `version` (1), `kind` ("autotune" or "select"), `job` (a readable name, unique in the file),
  `key` (a digest of the tuning key, its device as a type: a key is written once however many
  processes meet it), `device` (the device type it was met on), `time`, `pid`;
- `target`: where the kernel or selector is found again, "package.module:name" (with `path`, the
  folder to import it from where it is not installed) or "/path/to/script.py:name" for a script run
  as `python script.py` (imported by path, so its work must sit under `if __name__ == "__main__":`);
  with `target_args` when the object is made by calling the target (`kernelpick.ops`' selectors);
- `args` and `kwargs`: the call's arguments. A tensor is `{"tensor": {dtype, size, stride, offset,
  aligned}}` and is made again with that dtype, layout and alignment on the tuning's device:
  floating-point values at random (a fixed seed); the values of an integer or boolean tensor of at
  most `VALUES_LIMIT` elements (indices, offsets, counts: what can decide how much work a kernel
  does) are recorded (`values`, its storage from the start) and made again; a larger one is made of
  zeros, an index in bounds of any dimension. Numbers, strings, None and lists are as they are; a
  tuple is `{"tuple": [...]}`, a torch dtype `{"dtype": "float16"}`, a Triton dtype
  `{"triton_dtype": "fp16"}`, an instance of an importable dataclass (a tensor descriptor)
  `{"dataclass": "module:name", "fields": {...}}`;
- `grid` (a tuned kernel's): the launch grid, a list of integers, or where the call gave a function
  of the meta-parameters, `{"by_config": [[meta-parameters, grid], ...]}`: its value for each of the
  kernel's configs, evaluated on the call's arguments.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import triton.language as tl

from kernelpick import settings
from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_generator, example_tensor, laid_out

log = logging.getLogger("kernelpick.record")

#: The version of the line format; a reader refuses lines of a version it does not know.
RECORDING_VERSION = 1
#: Integer and boolean tensors of at most this many elements (of storage) have their values recorded.
VALUES_LIMIT = 4096


class Unrecordable(Exception):
    """A call that a recording cannot make again (an argument of a type it cannot describe)."""


# -- recording ---------------------------------------------------------------------------------


def record_kernel_call(
    kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any], key: tuple[Any, ...], grid: Any
) -> None:
    """Record the call of a tuned kernel (`kernelpick.autotune`) whose `key` this process meets for
    the first time, when `KERNELPICK_RECORD` names a file; nothing otherwise. Never raises."""
    path = settings.current().record_path
    if path is not None:
        _record(path, "autotune", kernel, args, kwargs, key, grid)


def record_selector_call(
    selector: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any], key: tuple[Any, ...]
) -> None:
    """Record the call of a selector whose signature `key` this process meets for the first time,
    when `KERNELPICK_RECORD` names a file; nothing otherwise. Never raises."""
    path = settings.current().record_path
    if path is not None:
        _record(path, "select", selector, inputs, kwargs, key, None)


def made_by(obj: object, factory: str, *args: Any) -> None:
    """Say how `obj`, which no module binds to a name, is found again in another process: by calling
    `factory` ("package.module:name") with `args` (plain data), as `kernelpick.ops.selector("mm")`."""
    with _lock:
        _origins[id(obj)] = (obj, (factory, list(args), None))


#: (target, target_args, folder to import from) of each object located, by id (the object is held,
#: so its id is not reused); None for one that cannot be found again.
_Origin = tuple[str, list[Any], str | None]
_origins: dict[int, tuple[object, _Origin | None]] = {}
_warned: set[object] = set()
_lock = threading.Lock()


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
        origin = _origin(target)
        if origin is None:
            _warn_once(
                id(target),
                f"kernelpick: {label} cannot be recorded (KERNELPICK_RECORD): no module binds it to a "
                "name, so another process cannot find it (made inside a function, or in `python -c` or "
                f"a notebook); its keys are left out of {path}. Bind it to a name at a module's top level",
            )
            return
        factory, factory_args, folder = origin
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
            entry["grid"] = _grid_data(target, args, kwargs, grid)
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


def _grid_data(kernel: Any, args: Sequence[Any], kwargs: Mapping[str, Any], grid: Any) -> Any:
    """The grid as data: its integers, or for a function of the meta-parameters its value for each
    distinct set of meta-parameters of the kernel's configs (a config it fails for is left out)."""
    if not callable(grid):
        return _grid_value(grid)
    named = {**dict(zip(kernel.arg_names, args)), **kwargs}
    table: dict[str, list[Any]] = {}
    for config in kernel.configs:
        meta = {name: encode(value, f"meta-parameter `{name}`") for name, value in config.kwargs.items()}
        identity = json.dumps(meta, sort_keys=True)
        if identity in table:
            continue
        try:
            table[identity] = [meta, _grid_value(grid({**named, **config.kwargs}))]
        except Exception:  # e.g. a grid that divides by a meta-parameter this config lacks
            continue
    if not table:
        raise Unrecordable("its grid function fails for every config")
    return {"by_config": list(table.values())}


def _grid_value(grid: Any) -> list[int]:
    values = list(grid) if isinstance(grid, (tuple, list)) else [grid]
    if not values or not all(isinstance(v, int) for v in values):
        raise Unrecordable(f"its grid is {grid!r}")
    return [int(v) for v in values]


def encode(value: Any, where: str) -> Any:
    """One argument of a call as plain data (this module's docstring lists the forms).

    Raises:
        Unrecordable: `value` is of a type a recording cannot make again; `where` names it.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        return {"tensor": _tensor_data(value, where)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if type(value) is tl.dtype:
        return {"triton_dtype": value.name}
    if isinstance(value, list):
        return [encode(v, where) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # a torch.Size too, not a named tuple
        return {"tuple": [encode(v, where) for v in value]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        found = getattr(sys.modules.get(kind.__module__), kind.__qualname__, None)
        if found is kind and kind.__module__ != "__main__":
            fields = {
                f.name: encode(getattr(value, f.name), where) for f in dataclasses.fields(value) if f.init
            }
            return {"dataclass": f"{kind.__module__}:{kind.__qualname__}", "fields": fields}
    raise Unrecordable(f"{where} is a {type(value).__name__}")


def _tensor_data(tensor: torch.Tensor, where: str) -> dict[str, Any]:
    try:
        spec = TensorSpec.of(tensor)
    except Exception as error:  # a tensor subclass without plain strides, say
        raise Unrecordable(
            f"{where} is a {type(tensor).__name__} whose layout cannot be read ({error})"
        ) from error
    data = spec.to_data()
    if (
        not (spec.dtype.is_floating_point or spec.dtype.is_complex)
        and spec.storage_length <= VALUES_LIMIT
        and _readable(tensor)
    ):
        data["values"] = tensor.as_strided((spec.storage_length,), (1,), 0).tolist()
    return data


def _readable(tensor: torch.Tensor) -> bool:
    """Whether a tensor's values can be read here: it has data, and reading it would not break a
    CUDA graph being captured (a copy to the host is not allowed in one)."""
    from torch._subclasses.fake_tensor import is_fake

    if tensor.device.type == "meta" or is_fake(tensor):
        return False
    return not (tensor.is_cuda and torch.cuda.is_current_stream_capturing())


# -- finding a kernel or selector again ---------------------------------------------------------


def _origin(obj: object) -> _Origin | None:
    """Where another process finds `obj` (located once per object)."""
    with _lock:
        known = _origins.get(id(obj))
    if known is not None:
        return known[1]
    found = _locate(obj)
    with _lock:
        _origins.setdefault(id(obj), (obj, found))
        return _origins[id(obj)][1]


def _locate(obj: object) -> _Origin | None:
    """The module-level name of `obj`: where its `__module__` and `__qualname__` say, else the first
    module that binds it (a script's `__main__` last: an installed module is found without running
    the script)."""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module_name, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        found: Any = sys.modules.get(module_name)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is obj:
            return _named(module_name, qualname)
    main = sys.modules.get("__main__")
    # The main module by its own name (multiprocessing binds it as `__mp_main__` too), and last.
    modules = [
        ("__main__" if module is main else name, module)
        for name, module in list(sys.modules.items())
        if module is not None and (module is not main or name == "__main__")
    ]
    modules.sort(key=lambda item: (item[0] == "__main__", item[0] != module_name))
    for name, module in modules:
        try:
            names = list(vars(module).items())
        except (TypeError, RuntimeError):  # not a module (an object a library put there), or changing
            continue
        bound = next((k for k, v in names if v is obj and not k.startswith("__")), None)
        if bound is not None:
            return _named(name, bound)
    return None


def _named(module_name: str, name: str) -> _Origin | None:
    """How another process imports `name` of the module `module_name`: by module name (with the
    folder to import it from, for a module that is the user's own), or a script by its path."""
    module = sys.modules[module_name]
    file = getattr(module, "__file__", None)
    if module_name == "__main__" or module_name.startswith("kernelpick_script_"):
        spec_name = getattr(getattr(module, "__spec__", None), "name", None)
        if spec_name and spec_name != "__main__":  # run as `python -m package.module`
            return f"{spec_name}:{name}", [], None
        if file is None:
            return None  # `python -c`, a notebook: nothing to import
        return f"{Path(file).resolve()}:{name}", [], None
    folder = None
    if file is not None:
        where = Path(file).resolve()
        where = where.parent if where.name == "__init__.py" else where
        folder = str(where.parents[len(module_name.split(".")) - 1])
    return f"{module_name}:{name}", [], None if folder in _installed_folders() else folder


@functools.cache
def _installed_folders() -> set[str]:
    """The folders installed packages and the standard library are imported from."""
    paths = sysconfig.get_paths()
    return {str(Path(paths[kind]).resolve()) for kind in ("purelib", "platlib", "stdlib") if kind in paths}


def resolve(target: str, args: Sequence[Any] = (), folder: str | None = None) -> Any:
    """The object a recording names: `target`'s module imported (a script by its path, under a name
    of its own; a module from `folder` when it is not importable otherwise), its attribute, and
    called with `args` when there are any.

    Raises:
        ConfigError: the module cannot be imported or has no such name.
    """
    where, colon, name = target.rpartition(":")
    if not colon or not where or not name:
        raise ConfigError(f"a recording names {target!r}, not 'package.module:name' or 'file.py:name'")
    try:
        module = _script(Path(where)) if where.endswith(".py") else _module(where, folder)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError(
            f"cannot import {where} for {target} ({type(error).__name__}: {error}): tune the recording "
            "where the program that made it can run"
        ) from error
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    if found is None:
        raise ConfigError(f"{where} has no {name} (the recording names {target}): was it renamed?")
    return found(*args) if args else found


def _module(name: str, folder: str | None) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        if folder is None or folder in sys.path:
            raise
    sys.path.append(folder)
    return importlib.import_module(name)


@functools.cache
def _script(path: Path) -> Any:
    """A script imported by its path, once, under `kernelpick_script_<stem>`, its folder on the path
    (as when it runs). Its functions are named by that path (`select.choice.qualified_name`), as in
    the script's own process, so that stored results of its selectors' choices match."""
    if not path.is_file():
        raise ConfigError(f"the script {path} that a recording names does not exist")
    name = f"kernelpick_script_{path.stem}"
    if name in sys.modules:
        name = f"{name}_{_digest(str(path))[:8]}"
    return import_file(path, name)


def import_file(path: Path, name: str) -> ModuleType:
    """The Python file `path` imported as the module `name`, its folder first on `sys.path` (as when
    Python runs it, so that it imports its neighbours, and so do isolation workers).

    Raises:
        ConfigError: `path` is not a Python file.
    """
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


def decode(data: Any, device: torch.device, generator: torch.Generator) -> Any:
    """An argument made again from `encode`'s data, its tensors on `device`.

    Raises:
        ConfigError: the data is of no form `encode` writes.
    """
    if isinstance(data, list):
        return [decode(v, device, generator) for v in data]
    if not isinstance(data, dict):
        return data
    if "tensor" in data:
        return _make_tensor(data["tensor"], device, generator)
    if "tuple" in data:
        return tuple(decode(v, device, generator) for v in data["tuple"])
    if "dtype" in data:
        dtype = getattr(torch, str(data["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ConfigError(f"a recording names dtype {data['dtype']!r}, which this torch lacks")
        return dtype
    if "triton_dtype" in data:
        return tl.dtype(str(data["triton_dtype"]))
    if "dataclass" in data:
        kind = resolve(str(data["dataclass"]))
        return kind(**{k: decode(v, device, generator) for k, v in data["fields"].items()})
    raise ConfigError(f"a recording holds an argument of no known form: {json.dumps(data)[:200]}")


def _make_tensor(data: Mapping[str, Any], device: torch.device, generator: torch.Generator) -> torch.Tensor:
    dtype = getattr(torch, str(data["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ConfigError(f"a recording names dtype {data['dtype']!r}, which this torch lacks")
    spec = TensorSpec(
        dtype,
        tuple(int(n) for n in data["size"]),
        tuple(int(s) for s in data["stride"]),
        int(data["offset"]),
        device,
        bool(data.get("aligned", True)),
    )
    values = data.get("values")
    if values is not None:
        return laid_out(spec, torch.tensor(values, dtype=dtype, device=device))
    if dtype.is_floating_point or dtype.is_complex:
        return example_tensor(spec, generator)
    return laid_out(spec, torch.zeros(max(spec.storage_length, 1), dtype=dtype, device=device))


class RecordedGrid:
    """A grid function made again from its values for each config's meta-parameters."""

    def __init__(self, table: Sequence[tuple[dict[str, Any], tuple[int, ...]]]) -> None:
        self.table = list(table)

    def __call__(self, meta: Mapping[str, Any]) -> tuple[int, ...]:
        for wanted, grid in self.table:
            if all(meta.get(name) == value for name, value in wanted.items()):
                return grid
        given = {name: meta.get(name) for name in self.table[0][0]} if self.table else {}
        raise ConfigError(
            f"the recording has no grid for the meta-parameters {given}: the kernel's configs changed "
            "since it was recorded; record again"
        )


def grid_of(data: Any) -> tuple[int, ...] | RecordedGrid:
    """The grid a recording's `grid` describes: a tuple, or a `RecordedGrid`."""
    if isinstance(data, dict):
        cpu = torch.device("cpu")
        generator = example_generator(cpu)
        return RecordedGrid(
            [
                ({k: decode(v, cpu, generator) for k, v in meta.items()}, tuple(grid))
                for meta, grid in data["by_config"]
            ]
        )
    return tuple(int(v) for v in data)


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
                _lock_file(descriptor)
                size = os.fstat(descriptor).st_size
                ends_cut = self._read_new(descriptor, size)
                if digest in self.seen:
                    return
                data = (("\n" if ends_cut else "") + line + "\n").encode()
                written = 0
                while written < len(data):
                    written += os.write(descriptor, data[written:])
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


def _lock_file(descriptor: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows: O_APPEND alone
        return
    fcntl.flock(descriptor, fcntl.LOCK_EX)


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
