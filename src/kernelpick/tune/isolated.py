"""Autotuning in worker processes: the caller compiles, workers benchmark, one config at a time.

The caller compiles the configs in forked compilers (a compiler that crashes or hangs takes down
only its own config); as each one compiles, a worker (one per GPU) loads it from Triton's on-disk
cache and times it on arguments re-created from their metadata, while the others still compile. A config that hangs, crashes its worker or
breaks its CUDA context is recorded as `timeout` or `crashed`; the caller's process and its CUDA
context never run it.
"""

from __future__ import annotations

import contextvars
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.device import DeviceInfo, describe
from kernelpick.bench.result import BenchmarkResult
from kernelpick.compile.precompile import CompileOutcome, precompile
from kernelpick.report import TuningProgress
from kernelpick.tune.config import Config
from kernelpick.workers import IsolationError, pool_for, reference_to
from kernelpick.workers.plan import step_budgets, worker_devices, worker_settings
from kernelpick.workers.problems import describe_arguments, rebuild_arguments, reused

if TYPE_CHECKING:
    from kernelpick.tune.prune import Pruner


class IsolatedTuner(Protocol):
    """What autotuning in workers takes of a tuned kernel (`kernelpick.Autotuner` is one): its
    identity and kernel, its configs and their pruning, and how to benchmark configs here."""

    name: str
    fn: Any
    arg_names: list[str]
    configs: list[Config]
    prune: Pruner
    workers: int | None
    default: Config | None
    defined_in: str | None
    timer: Any  # the user's do_bench, if any: it times each config once

    def budget_overrides(self) -> dict[str, Any]: ...

    def benchmark_configs(
        self,
        configs: list[Config],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        named: dict[str, Any],
        grid: Any,
        device: DeviceInfo,
        phases: dict[str, float],
        budgets: Mapping[str, Any] | None = None,
    ) -> dict[Config, BenchmarkResult]: ...


def grids_by_config(grid: Any, named: Mapping[str, Any], configs: Sequence[Config]) -> dict[str, list[int]]:
    """Each config's launch grid, evaluated here: a grid function cannot travel to a worker.

    Raises:
        IsolationError: the grid function failed for a config (it needs values Triton adds itself).
    """
    grids = {}
    for config in configs:
        try:
            value = grid({**named, **config.kwargs}) if callable(grid) else grid
        except Exception as error:
            raise IsolationError(f"the grid could not be evaluated outside a launch: {error}") from error
        grids[config.digest] = [int(n) for n in value]
    return grids


def benchmark_in_workers(
    tuner: IsolatedTuner,
    configs: list[Config],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    named: dict[str, Any],
    grid: Any,
    device: DeviceInfo,
    phases: dict[str, float],
) -> dict[Config, BenchmarkResult]:
    """Compile here, benchmark in workers.

    Raises:
        IsolationError: the kernel or its arguments cannot go to a worker (then measure in-process).
    """
    reference = reference_to(tuner, tuner.defined_in)
    current = settings.current()
    pool = pool_for(worker_devices(device))
    pool.start_soon()  # the workers start while the configs compile
    results: dict[Config, BenchmarkResult] = {}
    with (
        tempfile.TemporaryDirectory(prefix="kernelpick-") as payload,
        TuningProgress(f"compiling {tuner.name}", total=2 * len(configs)) as progress,
    ):
        problem = {
            "arguments": describe_arguments(named, Path(payload)),
            "positional": tuner.arg_names[: len(args)],
            "keywords": list(kwargs),
            "grids": grids_by_config(grid, named, configs),
        }
        request = {
            "target": reference.to_data(),
            "device": device.type,
            "problem": problem,
            "settings": {**worker_settings(), **tuner.budget_overrides()},
        }
        feed = pool.feed()
        outcomes: list[CompileOutcome] = []

        def compiled(index: int) -> None:  # a worker can load it from Triton's cache now
            feed.put(configs[index].digest)
            progress.advance()

        def compile_all() -> None:
            started = time.perf_counter()
            try:
                outcomes.extend(
                    precompile(
                        tuner.fn,
                        args,
                        kwargs,
                        configs,
                        grid=grid,
                        interpreter=device.interpreter,
                        workers=tuner.workers or settings.compile_workers(),
                        mode="process",
                        timings=phases,
                        timeout_s=current.compile_timeout_s,
                        on_compiled=compiled,
                    )
                )
            finally:
                phases["compile"] = time.perf_counter() - started
                feed.close()

        started = time.perf_counter()
        with ThreadPoolExecutor(1, thread_name_prefix="kernelpick-compile") as compiler:
            compiling = compiler.submit(contextvars.copy_context().run, compile_all)
            try:
                measured = pool.measure(
                    request,
                    feed,
                    timeout_s=current.bench_timeout_s,
                    confirm_top=0 if device.interpreter or tuner.timer is not None else current.confirm_top,
                    confirm_within=current.confirm_within,
                    on_done=progress.advance,
                    reference=None if tuner.default is None else tuner.default.digest,
                )
            finally:
                compiling.result()  # the compilers' own failure, if any, comes first
        phases["benchmark"] = time.perf_counter() - started
        for config, outcome in zip(configs, outcomes):
            if not outcome.ok:
                results[config] = BenchmarkResult.failed(outcome.status, outcome.message, outcome.seconds)
                progress.advance(2)
    compile_s = {config: outcome.seconds for config, outcome in zip(configs, outcomes)}
    results.update(
        {c: replace(measured[c.digest], compile_s=compile_s[c]) for c in configs if c.digest in measured}
    )
    return {c: results[c] for c in configs}


@dataclass(frozen=True, slots=True)
class _Problem:
    """A tuning problem re-created in a worker: the arguments, and the configs by digest."""

    named: dict[str, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    configs: dict[str, Config]
    grids: dict[Config, tuple[int, ...]]


def measure_in_worker(tuner: IsolatedTuner, request: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A worker's side: re-create the arguments (once for consecutive requests of one problem),
    benchmark the requested configs, answer by digest."""
    device = torch.device(request["device"])

    def rebuild() -> _Problem:
        problem = request["problem"]
        named = rebuild_arguments(problem["arguments"], device)
        args = tuple(named[name] for name in problem["positional"])
        kwargs = {name: named[name] for name in problem["keywords"]}
        positional = {name: named[name] for name in problem["positional"]}
        known = {c.digest: c for c in tuner.prune(tuner.configs, positional, kwargs)}
        grids = {known[d]: tuple(value) for d, value in problem["grids"].items() if d in known}
        return _Problem(named, args, kwargs, known, grids)

    state = reused([tuner.name, request["device"], request["problem"]], rebuild)
    configs = [state.configs[digest] for digest in request["candidates"]]
    info = describe(device)
    budgets = step_budgets(request, budgets_for(info))
    results = tuner.benchmark_configs(
        configs, state.args, state.kwargs, state.named, state.grids, info, {}, budgets
    )
    return {config.digest: result.to_dict() for config, result in results.items()}
