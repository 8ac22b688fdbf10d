"""Tuning jobs: what `kernelpick tune SPEC.py` tunes, declared in a spec file, and the journal of them."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelpick import settings
from kernelpick.calls import import_file, read_recording, replay_call
from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec

_Runner = Callable[[torch.device], object]


def make_input(spec: TensorSpec, device: torch.device) -> torch.Tensor:
    """An input tensor of a job, made on the job's device: random values of the spec's dtype and size."""
    if spec.dtype.is_floating_point:
        return torch.randn(spec.size, dtype=spec.dtype, device=device)
    if spec.dtype == torch.bool:
        return torch.rand(spec.size, device=device) < 0.5
    return torch.randint(-64, 64, spec.size, dtype=spec.dtype, device=device)


def tensor(dtype: str | torch.dtype, *size: int) -> TensorSpec:
    """An input tensor for `Job.select`: `tensor("float16", 128, 4096)`.

    Raises:
        ConfigError: `dtype` names no torch dtype, or a size is not a positive integer.
    """
    if isinstance(dtype, str):
        found = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(found, torch.dtype):
            raise ConfigError(
                f"tensor dtype {dtype!r} is not a torch dtype (e.g. 'float16', 'bfloat16', 'int32')"
            )
        dtype = found
    if not size or any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in size):
        raise ConfigError(f"tensor sizes must be positive integers, got {list(size)}")
    # A new row-major tensor; made on the job's device when the job runs (`make_input`).
    return TensorSpec.contiguous(size, dtype, torch.device("meta"))


@dataclass(frozen=True, slots=True)
class Job:
    """One tuning: a name (unique in its spec; the journal knows jobs by it), what to run on a device,
    and optionally its cost: how long it takes against the spec's other jobs, in any unit they share
    (FLOPs, say), for dealing the longest first when jobs run on several devices."""

    name: str
    run: _Runner = field(repr=False)
    cost: float | None = None

    def __post_init__(self) -> None:
        if self.cost is not None and not (isinstance(self.cost, (int, float)) and self.cost >= 0):
            raise ConfigError(
                f"job {self.name!r}: cost must be a number of 0 or more (its FLOPs, say), got {self.cost!r}"
            )

    @classmethod
    def select(
        cls, selector: Any, *inputs: Any, name: str | None = None, cost: float | None = None, **kwargs: Any
    ) -> Job:
        """A job that tunes `selector` (a `Selector` or `kernelpick.ops` op) for these inputs.

        `inputs` are `tensor(...)` specs, made on the device, and other values, passed as they are;
        `cost` is the job's (see `Job`).
        """
        label = name or f"{getattr(selector, 'name', selector)}({', '.join(map(str, inputs))})"

        def run(device: torch.device) -> object:
            made = [make_input(x, device) if isinstance(x, TensorSpec) else x for x in inputs]
            tune = getattr(selector, "tune", None)
            return tune(*made, **kwargs) if tune is not None else selector(*made, **kwargs)

        return cls(label, run, cost)


@dataclass(frozen=True, slots=True)
class Spec:
    """A loaded spec file: its jobs, by name, in order."""

    path: Path
    jobs: tuple[Job, ...]
    module: ModuleType = field(repr=False)

    @property
    def digest(self) -> str:
        """Names this spec file (by its resolved path) in journals."""
        return hashlib.sha256(str(self.path).encode()).hexdigest()[:16]

    def job(self, name: str) -> Job:
        for job in self.jobs:
            if job.name == name:
                return job
        raise ConfigError(f"spec {self.path} has no job named {name!r}")


_loaded: dict[Path, Spec] = {}
_lock = threading.Lock()


def load_spec(path: Path | str, *, reload: bool = False) -> Spec:
    """Import a spec file, or read a recording (once per process, unless `reload`), and check its jobs.

    The file's folder goes first on `sys.path`, as when Python runs a script, so that the spec can
    import its neighbours, and so can isolation workers that import the kernels it defines.

    Raises:
        ConfigError: the file is missing, defines no `JOBS`, or its jobs are not `Job`s with
            unique names.
    """
    path = Path(path).resolve()
    with _lock:
        if path in _loaded and not reload:
            return _loaded[path]
        if not path.is_file():
            raise ConfigError(f"tuning spec {path} does not exist")
        module = _recording(path) if path.suffix != ".py" else _import(path)
        jobs = getattr(module, "JOBS", None)
        if jobs is None:
            raise ConfigError(f"tuning spec {path} defines no JOBS: a list of kernelpick.jobs.Job")
        if callable(jobs):
            jobs = jobs()
        spec = Spec(path, _checked(path, jobs), module)
        _loaded[path] = spec
        return spec


def _import(path: Path) -> ModuleType:
    """A spec file imported under its name (`kernelpick_spec_<name>` when another module has it)."""
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) != str(path):
        name = f"kernelpick_spec_{path.stem}"  # the spec's name is taken by another module
    return import_file(path, name)


def _recording(path: Path) -> ModuleType:
    """A recording (`KERNELPICK_RECORD`) as a spec: a module whose `JOBS` are its calls."""
    module = ModuleType(f"kernelpick_recording_{path.stem}")
    module.JOBS = recorded_jobs(path)  # type: ignore[attr-defined]
    return module


def recorded_jobs(path: Path | str) -> list[Job]:
    """One job per key of a recording (a file written with `KERNELPICK_RECORD`): each makes its
    call again, on example inputs made on the job's device (`kernelpick.calls`). A spec can list
    them among its own: `JOBS = recorded_jobs("keys.jsonl") + [...]`.

    Raises:
        ConfigError: the file does not exist or holds no call.
    """
    return [Job(entry["job"], functools.partial(replay_call, entry)) for entry in read_recording(path)]


def _checked(path: Path, jobs: Iterable[Any]) -> tuple[Job, ...]:
    jobs = tuple(jobs)
    names: set[str] = set()
    for number, job in enumerate(jobs):
        if not isinstance(job, Job):
            raise ConfigError(f"tuning spec {path}: JOBS[{number}] is {type(job).__name__}, not a Job")
        if job.name in names:
            raise ConfigError(
                f"tuning spec {path}: two jobs are named {job.name!r}; job names must be unique"
            )
        names.add(job.name)
    if not jobs:
        raise ConfigError(f"tuning spec {path}: JOBS is empty")
    return jobs


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """How one job went, on which device, the kernels or selectors it tuned, and the digests of the
    keys it tuned (or found tuned) them for."""

    job: str
    device: str  # the device model it ran on
    seconds: float
    error: str = ""  # empty when it finished
    kernels: tuple[str, ...] = ()
    rows: tuple[dict[str, Any], ...] = ()  # what it stored, as plain data (`capture`), for the driver
    keys: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.error


class Journal:
    """Which jobs of a spec finished, per device model: a JSON-lines file, appended to as jobs end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def for_spec(cls, spec: Spec) -> Journal:
        return cls(settings.cache_dir() / "tune-journals" / f"{spec.path.stem}-{spec.digest}.jsonl")

    def finished(self) -> set[tuple[str, str]]:
        """(job, device model) of every job that finished."""
        return {(str(e["job"]), str(e["device"])) for e in self._entries() if e.get("ok")}

    def _entries(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a killed run: that job runs again
            if isinstance(entry, dict) and "job" in entry and "device" in entry:
                entries.append(entry)
        return entries

    def seconds(self, device: str) -> dict[str, float]:
        """How long each job took when it last ran, finished or not: on this device model where it
        ran on it, else on any other (a longer job is longer on every GPU)."""
        found: dict[str, float] = {}
        here: dict[str, float] = {}
        for entry in self._entries():
            seconds = entry.get("seconds")
            if isinstance(seconds, (int, float)) and seconds > 0:
                (here if entry.get("device") == device else found)[str(entry["job"])] = float(seconds)
        return {**found, **here}

    def kernels(self, device: str) -> set[str]:
        """The kernels and selectors that finished jobs tuned on this device model."""
        found: set[str] = set()
        for entry in self._entries():
            if entry.get("ok") and entry.get("device") == device:
                found.update(str(k) for k in entry.get("kernels", ()))
        return found

    def keys(self, device: str) -> tuple[set[str], set[str]]:
        """The digests of the keys that finished jobs tuned on this device model, and the kernels of
        the jobs a journal of an older kernelpick recorded no keys for (all their keys count)."""
        keys: set[str] = set()
        unkeyed: set[str] = set()
        for entry in self._entries():
            if entry.get("ok") and entry.get("device") == device:
                if "keys" in entry:
                    keys.update(str(k) for k in entry["keys"])
                else:
                    unkeyed.update(str(k) for k in entry.get("kernels", ()))
        return keys, unkeyed

    def record(self, outcome: JobOutcome) -> None:
        entry = {
            "job": outcome.job,
            "device": outcome.device,
            "ok": outcome.ok,
            "seconds": round(outcome.seconds, 3),
            "error": outcome.error,
            "kernels": list(outcome.kernels),
            "keys": list(outcome.keys),
            "time": time.time(),
        }
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as file:
                file.write(json.dumps(entry) + "\n")

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)
