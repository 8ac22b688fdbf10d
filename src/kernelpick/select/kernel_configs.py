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
from collections.abc import Callable, Mapping, Sequence
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
from kernelpick.compile.precompile import (
    CompileJob,
    CompileOutcome,
    compiling_beside,
    precompile,
    precompile_jobs,
)
from kernelpick.config import Config
from kernelpick.console import TuningProgress, warn_once
from kernelpick.device import DeviceInfo
from kernelpick.errors import IsolationError, failure_exception
from kernelpick.tensors import holds_descriptor, own_descriptors
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


@dataclass(frozen=True, slots=True)
class OwnArguments:
    """One config's own launch arguments (`KernelConfigs.own_arguments`), and what its hooks are given."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    named: dict[str, Any]


def _launch_on(launch: Callable[..., Any], own: OwnArguments, *_example: Any, **_keywords: Any) -> Any:
    """`launch` on a config's own arguments, whatever the example's: the same tensors, its own descriptors."""
    return launch(*own.args, **own.kwargs)


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
        phases: dict[str, float] | None = None,
        meanwhile: Callable[[], object] | None = None,
        own: Sequence[OwnArguments] | None = None,
    ) -> list[CompileOutcome]:
        """Compile `configs` for these arguments (or each for its `own`), many at once, in forked
        compilers unless `KERNELPICK_COMPILE_MODE` says threads (`kernelpick.compile.precompile`)."""
        calls = [(args, kwargs)] * len(configs) if own is None else [(o.args, o.kwargs) for o in own]
        jobs = [CompileJob(self.fn, a, k, config, grid) for config, (a, k) in zip(configs, calls)]
        return precompile_jobs(
            jobs,
            interpreter=device.interpreter,
            workers=self.workers or settings.compile_workers(),
            mode=settings.current().compile_mode,
            phases=phases,
            meanwhile=meanwhile,
        )

    def warm_up(
        self,
        configs: Sequence[Config],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        grid: Any,
        device: DeviceInfo,
    ) -> list[CompileOutcome]:
        """Compile `configs` for a call without running any: each on its own arguments, its hooks run
        first, where hooks must run before compiling (`hooks_before_compiling`)."""
        own = None
        if self.hooks_before_compiling(args, kwargs):
            example = self._copies(args, kwargs, self.tensor_names(args, kwargs), None)
            own = [self.own_arguments(config, example) for config in configs]
        return self.compile(configs, args, kwargs, grid, device, own=own)

    def hooks_before_compiling(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether each config's pre-hooks must run before it is compiled, as Triton runs them before
        the launch that compiles it: when there are pre-hooks and the launch's arguments hold a tensor
        descriptor, whose block shape such hooks set from the config (Triton's TMA kernels pass a
        placeholder). No other argument a hook can change alters what Triton compiles; elsewhere the
        hooks run before each timed run only, each paired with the post_hook, as in Triton."""
        hooked = self.pre_hook is not None or any(c.pre_hook for c in self.configs)
        return hooked and holds_descriptor([*args, *kwargs.values()])

    def own_arguments(self, config: Config, example: KernelArguments) -> OwnArguments:
        """`config`'s own arguments: the example's, each tensor descriptor a copy of its own, which
        the config's pre_hook and then the tuner's (Triton's order) have been given."""
        named = own_descriptors(example.named)
        given = {**named, **config.all_kwargs()}  # Triton's `full_nargs`
        for hook in (config.pre_hook, self.pre_hook):
            if hook is not None:
                hook(given)
        positional = self.arg_names[: len(example.args)]
        return OwnArguments(tuple(named[n] for n in positional), {n: named[n] for n in example.kwargs}, given)

    def accesses(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        """Which arguments the kernel may write, and which it may read (None: assume all).

        From the access analysis of the kernel's TTIR (with the first config's meta-parameters);
        every tensor when the analysis is unsure. `restore_value` arguments count as both.
        """
        tensors = self.tensor_names(args, kwargs)  # tensor descriptors too
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
        """Compile `configs` (the access analysis meanwhile) and time them in this process.

        Where pre-hooks must run before compiling (`hooks_before_compiling`), every tensor is copied
        first (hooks are the user's code: they may write any argument), and each config is compiled
        and timed on its own arguments (`own_arguments`), its hooks run on them before it compiles.
        """
        run = runner(self.fn, device.interpreter)
        results: dict[Config, BenchmarkResult] = {}
        hooked_first = self.hooks_before_compiling(args, kwargs)
        with TuningProgress(f"compiling {self.name}", total=2 * len(configs)) as progress:
            own: list[OwnArguments] | None = None
            if hooked_first:
                started = time.perf_counter()
                example = self._copies(args, kwargs, self.tensor_names(args, kwargs), None)
                own = [self.own_arguments(config, example) for config in configs]
                phases["copy_inputs"] = time.perf_counter() - started
                started = time.perf_counter()
                outcomes = self.compile(configs, args, kwargs, grid, device, phases, own=own)
                phases["compile"] = time.perf_counter() - started
            else:
                accesses: list[tuple[list[str], list[str] | None]] = []

                def analyze_meanwhile() -> None:  # runs while the compilers work
                    started = time.perf_counter()
                    accesses.append(self.accesses(args, kwargs))
                    phases["analysis"] = time.perf_counter() - started

                # Compiling needs only the arguments' types, and a warm-up call launches nothing: the
                # real arguments serve, and the copies are made once the analysis says which.
                started = time.perf_counter()
                outcomes = self.compile(configs, args, kwargs, grid, device, phases, analyze_meanwhile)
                phases["compile"] = time.perf_counter() - started
                started = time.perf_counter()
                example = self._copies(args, kwargs, *accesses[0])
                phases["copy_inputs"] = time.perf_counter() - started
            started = time.perf_counter()
            progress.advance(len(configs), f"benchmarking {self.name}")
            candidates = []
            done = progress.on_done(self.finished)
            for index, (config, outcome) in enumerate(zip(configs, outcomes)):
                named = example.named if own is None else own[index].named
                hooks = self._hooks(config, named)
                if outcome.ok:
                    launch = functools.partial(run, grid=grid, warmup=False, **config.all_kwargs())
                    if own is not None:
                        launch = functools.partial(_launch_on, launch, own[index])
                    candidates.append(Candidate(str(config), config.digest, launch, hooks))
                    continue
                results[config] = BenchmarkResult.failed(outcome.status, outcome.message, outcome.seconds)
                done(config.digest, results[config])
                if hooks is not None:
                    error = failure_exception(outcome.status, outcome.message)
                    hooks.failed_before_running(error, before_ran=own is not None)
            with settings.override(**self.budget_overrides):
                measured = measure(
                    candidates,
                    Measurement(example, device, restore_always=True),
                    self.timer or timer_for(device),
                    self._budgets(device),
                    reference=None if self.default is None else self.default.digest,
                    warm_up_ms=self._warm_up_ms(),
                    on_done=done,
                )
            phases["benchmark"] = time.perf_counter() - started
        return _with_compile_seconds(configs, outcomes, measured, results)

    def tensor_names(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[str]:
        """The arguments that are tensors or hold one (a tensor descriptor), in the kernel's order."""
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        return [n for n in self.arg_names if n in named and tensor_of(named[n]) is not None]

    def _copies(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        written: Sequence[str],
        read: Sequence[str] | None,
    ) -> KernelArguments:
        """The arguments configs are timed on: copies of those `written`, restored before each run."""
        return KernelArguments(self.arg_names, args, kwargs, written, self.reset_to_zero, read)

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
                            phases=phases,
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
                        phases=phases,  # screen, confirm and the workers' own seconds, as a selection's
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
            reference_digest=None if self.default is None else self.default.digest,
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
