"""The configs of one `@triton.jit` kernel as the engine compiles and measures them.

`kernelpick.autotune` (the `triton.autotune` front, `kernelpick.tune`) gives the engine a kernel, its
configs and the user's options; this compiles them in forked compilers, asks the access analysis
which arguments the kernel may write (those are copied, and restored before every run), and times
them: in worker processes when isolation is wanted (the kernel crosses once, each config as its
meta-parameters and grid; each is timed as soon as it compiled), or in this process when something
of the kernel's must run here (the user's hooks or do_bench, which Triton runs in the user's process).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelpick import settings
from kernelpick.analysis import analyze
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.inputs import KernelArguments, tensor_of
from kernelpick.bench.measure import Candidate, Hooks, Measurement, OnDone, measure
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer, timer_for
from kernelpick.bench.verify import tf32_allowed
from kernelpick.compile.launch import runner
from kernelpick.compile.portable import KernelLaunch
from kernelpick.compile.precompile import CompileOutcome, compiling_beside, precompile
from kernelpick.config import Config
from kernelpick.console import TuningProgress, warn_once
from kernelpick.device import DeviceInfo
from kernelpick.errors import IsolationError, failure_exception
from kernelpick.workers import values
from kernelpick.workers.plan import isolation_wanted
from kernelpick.workers.request import (
    Problem,
    feed_for,
    grids_by_config,
    measure_in_workers,
    payload_folder,
    start_workers_for,
)

log = logging.getLogger("kernelpick.tune")


@dataclass
class KernelConfigs:
    """One kernel's configs and the user's options for measuring them (what `kernelpick.autotune`
    was given). `analyzed` is what the access analysis is asked about: the tuned kernel, whose first
    config's meta-parameters complete the arguments. `finished` is given each config's digest and
    result as it is done with (the tuning stores it then). After `measure`, `timed_here` says why the
    configs were timed in this process although isolation was wanted (None: they were not)."""

    name: str
    fn: Any
    arg_names: Sequence[str]
    analyzed: Any
    configs: Sequence[Config]
    reset_to_zero: Sequence[str] = ()
    restore_value: Sequence[str] = ()
    pre_hook: Callable[..., object] | None = None
    post_hook: Callable[..., object] | None = None
    timer: Timer | None = None
    workers: int | None = None
    isolate: bool | None = None
    default: Config | None = None
    budget_overrides: Mapping[str, Any] = field(default_factory=dict)
    finished: OnDone | None = None
    timed_here: str | None = None

    def compile(
        self,
        configs: Sequence[Config],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        grid: Any,
        device: DeviceInfo,
        timings: dict[str, float] | None = None,
        meanwhile: Callable[[], object] | None = None,
    ) -> Iterable[Any]:
        """Compile `configs` for these arguments, many at once, in forked compilers unless
        `KERNELPICK_COMPILE_MODE` says threads (`kernelpick.compile.precompile`)."""
        return precompile(
            self.fn,
            args,
            kwargs,
            configs,
            grid=grid,
            interpreter=device.interpreter,
            workers=self.workers or settings.compile_workers(),
            mode=settings.current().compile_mode,
            timings=timings,
            meanwhile=meanwhile,
        )

    def accesses(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        """Which arguments the kernel may write, and which it may read (None: assume all).

        From the access analysis of the kernel's TTIR (with the first config's meta-parameters);
        every tensor when the analysis is unsure. `restore_value` arguments count as both.
        """
        named = {
            **dict(zip(self.arg_names, args)),
            **{k: v for k, v in kwargs.items() if k in self.arg_names},
        }
        tensors = [n for n, v in named.items() if tensor_of(v) is not None]  # tensor descriptors too
        try:
            access = analyze(self.analyzed, *args, **kwargs)
        except Exception as error:  # copies of every tensor are safe; the launch says what is wrong
            log.debug("no access analysis for %s: %s", self.name, error)
            access = None
        if access is None or not access.certain:
            if access is not None:
                log.info("%s: benchmarking on copies of every tensor: %s", self.name, access.reason)
            written, read = tensors, None
        else:
            written, read = list(access.mutated), [*access.read, *self.restore_value]
        order = self.arg_names.index
        return sorted({*written, *self.restore_value}, key=order), read

    def measure(
        self,
        configs: list[Config],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        named: dict[str, Any],
        grid: Any,
        device: DeviceInfo,
        phases: dict[str, float],
    ) -> dict[Config, BenchmarkResult]:
        """Compile and time `configs`: in worker processes when isolation is wanted, unless something
        of this kernel must run in this process (the user's hooks, the user's do_bench), else here."""
        if isolation_wanted(device, self.isolate):
            reason = self._runs_here()
            if reason is None:
                try:
                    return self._benchmark_in_workers(configs, args, kwargs, named, grid, device, phases)
                except IsolationError as error:
                    reason = str(error)
                    warn_once(
                        log, reason, "%s: benchmarking in this process, not in workers: %s", self.name, reason
                    )
            else:
                log.info("%s: benchmarking in this process, not in workers: %s", self.name, reason)
            self.timed_here = reason
        return self._benchmark_here(configs, args, kwargs, grid, device, phases)

    def _runs_here(self) -> str | None:
        """Why this kernel is timed in the caller's process even when isolated (None: it need not be)."""
        if self.timer is not None:
            return "its do_bench times in your process, as Triton's does"
        if self.pre_hook is not None or self.post_hook is not None or any(c.pre_hook for c in self.configs):
            return "its hooks are your code, which runs in your process, as Triton runs it"
        return None

    def _benchmark_here(
        self,
        configs: list[Config],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        grid: Any,
        device: DeviceInfo,
        phases: dict[str, float],
    ) -> dict[Config, BenchmarkResult]:
        """Compile `configs` (the access analysis meanwhile) and time them in this process."""
        accesses: list[tuple[list[str], list[str] | None]] = []

        def analyze_meanwhile() -> None:  # runs while the compilers work
            started = time.perf_counter()
            accesses.append(self.accesses(args, kwargs))
            phases["analysis"] = time.perf_counter() - started

        run = runner(self.fn, device.interpreter)
        results: dict[Config, BenchmarkResult] = {}
        with TuningProgress(f"compiling {self.name}", total=2 * len(configs)) as progress:
            # Compiling needs only the arguments' types, and a warm-up call launches nothing: the
            # real arguments serve, and the copies are made once the analysis says which.
            started = time.perf_counter()
            outcomes = list(self.compile(configs, args, kwargs, grid, device, phases, analyze_meanwhile))
            phases["compile"] = time.perf_counter() - started
            started = time.perf_counter()
            written, read = accesses[0]
            example = KernelArguments(self.arg_names, args, kwargs, written, self.reset_to_zero, read)
            phases["copy_inputs"] = time.perf_counter() - started
            started = time.perf_counter()
            progress.advance(len(configs), f"benchmarking {self.name}")
            candidates = []
            done = progress.on_done(self.finished)
            for config, outcome in zip(configs, outcomes):
                hooks = self._hooks(config, example.named)
                if outcome.ok:
                    launch = functools.partial(run, grid=grid, warmup=False, **config.all_kwargs())
                    candidates.append(Candidate(str(config), config.digest, launch, hooks))
                    continue
                results[config] = BenchmarkResult.failed(outcome.status, outcome.message, outcome.seconds)
                done(config.digest, results[config])
                if hooks is not None:
                    hooks.failed_before_running(failure_exception(outcome.status, outcome.message))
            with settings.override(**self.budget_overrides):
                measured = measure(
                    candidates,
                    Measurement(example, device, restore_always=True),
                    self.timer or timer_for(device),
                    self._budgets(device),
                    keep=None if self.default is None else self.default.digest,
                    warm_up_ms=self._warm_up_ms(),
                    on_done=done,
                )
            phases["benchmark"] = time.perf_counter() - started
        return _with_compile_seconds(configs, outcomes, measured, results)

    def _hooks(self, config: Config, named: Mapping[str, Any]) -> Hooks | None:
        """The user's hooks around each run of `config` (a config's pre_hook first, as in Triton)."""
        before = tuple(hook for hook in (config.pre_hook, self.pre_hook) if hook is not None)
        if not before and self.post_hook is None:
            return None
        return Hooks(before, self.post_hook, {**named, **config.all_kwargs()})

    def _budgets(self, device: DeviceInfo) -> dict[str, Any]:
        """The rounds of timing: the settings', or one round for the user's do_bench, which times each
        config once, as Triton's does."""
        budgets = budgets_for(device)
        return {"screening": budgets["screening"]} if self.timer is not None else budgets

    def _warm_up_ms(self) -> float:
        """How long the GPU runs the configs in turn before timing (none under the user's do_bench)."""
        return 0.0 if self.timer is not None else settings.current().select_warmup_ms

    def _benchmark_in_workers(
        self,
        configs: list[Config],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        named: dict[str, Any],
        grid: Any,
        device: DeviceInfo,
        phases: dict[str, float],
    ) -> dict[Config, BenchmarkResult]:
        """Compile here, in forked compilers, and time in the workers, each config as soon as it compiled.

        The kernel crosses by value, once, and each config as its meta-parameters and grid
        (`kernelpick.compile.portable`): the workers load what the compilers left in Triton's
        cache. The access analysis runs here while the compilers run.

        Raises:
            IsolationError: the kernel or its arguments cannot go to a worker, or no worker starts
                (then it is timed in this process).
        """
        current = settings.current()
        start_workers_for(device)  # the workers start while the configs compile
        grids = grids_by_config(grid, named, configs)
        kernel = values.encode(self.fn)  # once: the configs go without it
        payloads = {
            c.digest: values.encode(KernelLaunch(str(c), dict(c.all_kwargs()), grids[c.digest]))
            for c in configs
        }

        results: dict[Config, BenchmarkResult] = {}
        outcomes: list[CompileOutcome] = []
        with (
            payload_folder() as payload,
            TuningProgress(f"compiling {self.name}", total=2 * len(configs)) as progress,
        ):
            feed = feed_for(device)

            def compiled(index: int) -> None:  # a worker can load it from Triton's cache now
                feed.put(configs[index].digest)
                progress.advance()

            submitted, analyzed = threading.Event(), threading.Event()

            def wait_for_analysis() -> None:  # in the compile thread, while its children compile
                submitted.set()
                analyzed.wait()

            def compile_all(stop: threading.Event) -> None:
                started = time.perf_counter()
                try:
                    outcomes.extend(
                        precompile(
                            self.fn,
                            args,
                            kwargs,
                            configs,
                            grid=grid,
                            interpreter=device.interpreter,
                            workers=self.workers or settings.compile_workers(),
                            mode="process",
                            timings=phases,
                            timeout_s=current.compile_timeout_s,
                            meanwhile=wait_for_analysis,
                            on_compiled=compiled,
                            stop=stop,
                        )
                    )
                finally:
                    phases["compile"] = time.perf_counter() - started
                    submitted.set()
                    feed.close()

            started = time.perf_counter()
            with compiling_beside(compile_all):
                try:
                    # After Triton's code generation for every config, which holds the GIL: the
                    # analysis then runs beside the children compiling, not against it.
                    submitted.wait()
                    problem = self._problem(args, kwargs, device, Path(payload), kernel, phases)
                finally:
                    analyzed.set()
                with settings.override(**self.budget_overrides):
                    measured = measure_in_workers(
                        problem,
                        payloads,
                        [],
                        device,
                        feed=feed,
                        on_done=progress.on_done(self.finished),
                        timings=phases,  # screen, confirm and the workers' own seconds, as a selection's
                    )
            phases["benchmark"] = time.perf_counter() - started
            for config, outcome in zip(configs, outcomes):
                if not outcome.ok:
                    results[config] = BenchmarkResult.failed(outcome.status, outcome.message, outcome.seconds)
                    progress.advance(2)
                    if self.finished is not None:
                        self.finished(config.digest, results[config])
        return _with_compile_seconds(configs, outcomes, measured, results)

    def _problem(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        device: DeviceInfo,
        payload: Path,
        kernel: str,
        phases: dict[str, float],
    ) -> Problem:
        """What the workers measure this kernel's configs on: its arguments, what the access analysis
        says it may write and read, and the kernel itself, encoded.

        Raises:
            IsolationError: an argument cannot be described as data.
        """
        started = time.perf_counter()
        written, read = self.accesses(args, kwargs)
        phases["analysis"] = time.perf_counter() - started
        return Problem.describe(
            device,
            args,
            kwargs,
            payload,
            example="kernel",
            names=tuple(self.arg_names),
            written=tuple(written),
            read=None if read is None else tuple(read),
            zeroed=tuple(self.reset_to_zero),
            keep=None if self.default is None else self.default.digest,
            warm_up_ms=self._warm_up_ms(),
            tf32=tf32_allowed(),
            kernel=kernel,
        )


def _with_compile_seconds(
    configs: Sequence[Config],
    outcomes: Sequence[CompileOutcome],
    measured: Mapping[str, BenchmarkResult],
    failed: Mapping[Config, BenchmarkResult],
) -> dict[Config, BenchmarkResult]:
    """Every config's result, in order: those measured (by digest), each with its compile seconds,
    and those that failed before they could be."""
    results = dict(failed)
    for config, outcome in zip(configs, outcomes):
        if config.digest in measured:
            results[config] = replace(measured[config.digest], compile_s=outcome.seconds)
    return {c: results[c] for c in configs}
