"""The one request a worker serves: a problem as plain data, and the candidates to measure on it."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch
import triton
from triton.runtime import _allocation

from kernelpick import settings
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.inputs import Example, generated
from kernelpick.bench.measure import Measurement, compiled
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import timer_for
from kernelpick.bench.verify import Tolerance
from kernelpick.compile.precompile import CompileJob, CompileOutcome, compile_each, patience
from kernelpick.device import DeviceInfo, describe, device_of
from kernelpick.tensors import example_generator
from kernelpick.workers import values
from kernelpick.workers.plan import worker_devices, worker_settings
from kernelpick.workers.pool import Feed, pool_for
from kernelpick.workers.problems import describe_value, rebuild_value


class Portable(Protocol):
    """A candidate as a worker receives it."""

    name: str

    def compile_job(self, example: Any, device: DeviceInfo) -> CompileJob | CompileOutcome | None:
        """What compiling it for these example arguments takes, or the outcome when there is
        nothing to compile or it failed before compiling (None: the caller compiled it)."""
        ...

    def callable(self) -> Callable[..., Any]:
        """The function timed: `f(*args, **kwargs)` on the example's arguments, returning the output."""
        ...


@dataclass(frozen=True, slots=True)
class Problem:
    """What every candidate of one measurement runs on, as plain data (JSON).

    `reference` and `input_gen` are `values.encode`d callables (`input_gen` makes the positional
    example inputs). `keeping` says how the example is kept between runs: the keyword arguments of
    `kernelpick.bench.inputs.Example` (a tuned kernel's `KernelCall.restoring`; none: a selection's).
    """

    device: str
    inputs: tuple[Any, ...]
    keywords: Mapping[str, Any]
    kernel: str | None = None  # a tuned kernel, encoded: its configs come as `KernelLaunch`es without it
    keeping: Mapping[str, Any] = field(default_factory=dict)
    input_gen: str | None = None
    reference: str | None = None
    reference_name: str = ""
    tolerance: tuple[float, float] | None = None
    tf32: bool = False
    reference_digest: str | None = None  # the candidate kept unless clearly beaten (`kernelpick.bench.pick`)
    # A search's batches give up straggling compiles (`kernelpick.compile.precompile.patience`).
    patience: float = 0.0
    allocator: bool = False  # the caller set an allocator with `triton.set_allocator`

    @classmethod
    def describe(
        cls,
        device: DeviceInfo,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        payload_dir: Path | None,
        **details: Any,
    ) -> Problem:
        """The problem of these arguments on `device` (`details`: the other fields), and whether the
        caller set an allocator with `triton.set_allocator` (kernels that make tensor descriptors on
        the device call one); integer tensors' values travel in files in `payload_dir`
        (`describe_value`; None: the worker makes new ones, as for the others).

        Raises:
            IsolationError: an argument cannot be described as data (an arbitrary object).
        """
        return cls(
            device=device.type,
            inputs=tuple(describe_value(v, payload_dir) for v in args),
            keywords={name: describe_value(v, payload_dir) for name, v in kwargs.items()},
            allocator=not isinstance(_allocation._allocator.get(), _allocation.NullAllocator),
            **details,
        )

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Problem:
        """The problem `to_data` gave, its tuples made lists by JSON on the way."""
        fields: dict[str, Any] = {n: tuple(v) if isinstance(v, list) else v for n, v in data.items()}
        return cls(**fields)

    @property
    def digest(self) -> str:
        """What tells this problem from another as JSON does: 2 from 2.0, 1 from True (equal in Python,
        yet different arguments: Triton compiles a kernel for each)."""
        return hashlib.sha256(json.dumps(self.to_data(), sort_keys=True, default=str).encode()).hexdigest()


def _scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """A worker's allocator: Triton's scratch memory from torch's caching allocator (stream-ordered on
    the current stream), `alignment` bytes aligned (a GPU block's 512 bytes are; a CPU's 64 may not be)."""
    buffer = torch.empty(size + alignment, dtype=torch.int8, device=device_of(()))
    start = -buffer.data_ptr() % alignment
    return buffer[start : start + size]


class _WorkerProblem:
    """A problem re-created in a worker: its example arguments, its measurement, and the candidates
    decoded so far (by digest)."""

    def __init__(self, problem: Problem) -> None:
        device = torch.device(problem.device)
        self.problem = problem
        self.device = describe(device)
        # An allocator where the caller set one, none where it did not (then a kernel that needs one
        # fails here as it would there). Not the caller's own: a user's allocator is their program's
        # (a closure over its tensors, a pool of its own); what a timing needs of it is memory.
        triton.set_allocator(_scratch if problem.allocator else _allocation.NullAllocator())
        generator = example_generator(device)
        args = tuple(rebuild_value(v, device, generator) for v in problem.inputs)
        kwargs = {name: rebuild_value(v, device, generator) for name, v in problem.keywords.items()}
        reference = None
        if problem.reference is not None:
            found = values.decode(problem.reference)  # a choice, or a function
            reference = (problem.reference_name, found.callable() if hasattr(found, "compile_job") else found)
        if problem.input_gen is not None:
            args = generated(values.decode(problem.input_gen), args, kwargs)
        self.example = Example(args, kwargs, **problem.keeping)
        tolerance = None if problem.tolerance is None else Tolerance(*problem.tolerance)
        self.measurement = Measurement(self.example, self.device, reference, tolerance, problem.tf32)
        self._kernel = None if problem.kernel is None else values.decode(problem.kernel)
        self._portables: dict[str, Portable] = {}

    def portable(self, digest: str, payload: str) -> Portable:
        if digest not in self._portables:
            found = values.decode(payload)
            if self._kernel is not None:  # a config of the problem's kernel
                found = replace(found, kernel=self._kernel, interpreter=self.device.interpreter)
            else:  # a choice, measured on this worker's device
                found = found.on(self.device)
            self._portables[digest] = found
        return self._portables[digest]


_current: _WorkerProblem | None = None


def answer(request: Mapping[str, Any], phases: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
    """A worker's side of one request: re-create the problem (once for consecutive requests of one
    problem), then compile the candidates (the prepare step, which answers with failures only) or
    measure them. Each result is keyed by its candidate's digest; `phases` gets the seconds of each
    part (`problem`, `load` and `measure`)."""
    global _current
    phases = {} if phases is None else phases
    started = time.perf_counter()
    problem = Problem.from_data(request["problem"])
    if _current is None or _current.problem.digest != problem.digest:  # one problem kept between requests
        _current = None  # the old problem's tensors go before the new ones are made
        _current = _WorkerProblem(problem)
    state = _current
    phases["problem"] = time.perf_counter() - started
    started = time.perf_counter()
    torch.backends.cuda.matmul.allow_tf32 = problem.tf32  # what the caller computes with
    portables = {digest: state.portable(digest, payload) for digest, payload in request["candidates"].items()}
    # Compiled already in the prepare step, if there was one: then each is a hit in Triton's caches.
    # Every Triton kernel at once, in forked compilers (which never touch this worker's CUDA context).
    with patience(problem.patience):
        compiled_here = compile_each(
            [functools.partial(p.compile_job, state.example, state.device) for p in portables.values()],
            interpreter=state.device.interpreter,
            workers=settings.compile_workers(),
            mode="process",
            timeout_s=settings.current().compile_timeout_s,
        )
    # Without their seconds: a worker's results carry none (the caller adds those of its own compiles).
    outcomes = {d: None if o is None else replace(o, seconds=None) for d, o in zip(portables, compiled_here)}
    if request.get("step") == "prepare":
        phases["load"] = time.perf_counter() - started
        failed = {d: o for d, o in outcomes.items() if o is not None and not o.ok}
        return {d: BenchmarkResult.failed(o.status, o.message).to_dict() for d, o in failed.items()}
    candidates = {d: compiled(portables[d].name, o, portables[d].callable) for d, o in outcomes.items()}
    phases["load"] = time.perf_counter() - started
    started = time.perf_counter()
    budgets = budgets_for(state.device, per_call=problem.kernel is None)
    if request.get("step") == "confirm":  # the second round only, with this worker's share of the runs
        confirming = budgets.get("confirming") or budgets["screening"]
        share = float(request.get("share", 1.0))
        budgets = {"screening": None, "confirming": replace(confirming, rep_ms=confirming.rep_ms * share)}
    else:  # the first round only, its cutoff from the lowest cost the pool found so far
        best = request.get("best_ms")
        budgets.update(confirm_top=0, best_ms=float("inf") if best is None else float(best))
    results = state.measurement.measure(
        candidates, timer_for(state.device), budgets, reference=problem.reference_digest
    )
    phases["measure"] = time.perf_counter() - started
    return {digest: result.to_dict() for digest, result in results.items()}


def measure_in_workers(
    problem: Problem,
    payloads: Mapping[str, str],
    candidates: Sequence[str],
    device: DeviceInfo,
    **options: Any,
) -> dict[str, BenchmarkResult]:
    """The caller's side: measure `candidates` on `problem` in the workers of `device`'s GPUs, one
    candidate at a time per worker, then the closest few again on all of them (`kernelpick.workers.pool`).

    Args:
        problem: what they run on.
        payloads: every candidate, `values.encode`d, by digest (a fed candidate's must be in it
            before it is fed).
        candidates: the digests to measure known now, which the workers compile first, many at
            once (what the caller compiled itself it feeds them through `options`' `feed`).
        device: the device measured for.
        options: `WorkerPool.measure`'s `feed`, `on_done`, `phases` and `best_ms`.

    Raises:
        IsolationError: the workers cannot do the work at all (they do not start, or fail on the
            first request): the caller measures in its own process instead.
    """
    current = settings.current()
    request = {"problem": problem.to_data(), "settings": worker_settings()}
    return pool_for(worker_devices(device)).measure(
        request,
        candidates,
        payloads,
        timeout_s=current.bench_timeout_s,
        prepare_timeout_s=current.compile_timeout_s,
        confirm_top=0 if device.interpreter else current.confirm_top,
        confirm_within=current.confirm_within,
        reference=problem.reference_digest,
        **options,
    )


def feed_for(device: DeviceInfo) -> Feed:
    """A feed of candidates for a measurement in the workers of `device` (`measure_in_workers`), which
    start now in the background if they are not running (while the caller compiles)."""
    pool = pool_for(worker_devices(device))
    pool.start_soon()
    return pool.feed()
