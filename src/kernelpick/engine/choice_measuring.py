"""Measuring a tuning's candidates, a selection's choices or a tuned kernel's configs: in workers or here."""

from __future__ import annotations

import functools
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.inputs import Example, InputGen, new_values
from kernelpick.bench.measure import Candidate, Measurement, OnDone, compiled
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer, timer_for
from kernelpick.bench.verify import Tolerance, tf32_allowed
from kernelpick.compile.precompile import CompileOutcome, compiling_beside, current_patience
from kernelpick.console import TuningProgress, warn_once
from kernelpick.device import capturing
from kernelpick.engine.choice import (
    Choice,
    PortableChoice,
    compile_choices,
    compiles_without_user_code,
    qualified_name,
)
from kernelpick.engine.signature import Signature
from kernelpick.engine.triton_choice import ConfigChoice, KernelCall
from kernelpick.errors import IsolationError, TuningInCapture
from kernelpick.tensors import preserved_rng
from kernelpick.workers import values
from kernelpick.workers.plan import isolation_wanted
from kernelpick.workers.request import Problem, feed_for, measure_in_workers

log = logging.getLogger("kernelpick.select")
_HERE = "%s: measuring in this process, not in workers: %s"


@dataclass
class ChoiceMeasuring:
    """How one tuning measures its candidates on one call's `inputs` and `kwargs`: `against` what
    outputs are checked (a choice or a function; None: nothing), the front's options, and the settings
    measuring `overrides` (a tuned kernel's `warmup=` and `rep=`). `kernel`: a tuned kernel's call, its
    configs measured on its arguments (None: choices, on example inputs). After `measure`, `timed_here`
    names each candidate measured here although isolation was wanted, with the reason."""

    name: str
    signature: Signature
    inputs: tuple[Any, ...]
    kwargs: dict[str, Any]
    against: Choice | Callable[..., Any] | None = None
    input_gen: InputGen | None = None
    tolerance: Tolerance | None = None
    timer: Timer | None = None
    isolate: bool | None = None
    reference_digest: str | None = None
    kernel: KernelCall | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    timed_here: dict[str, str] = field(default_factory=dict)
    checked_against: str | None = None
    #: Seconds per step over one tuning's measurements: compile, analysis, copy_inputs, benchmark; in
    #: workers also prepare, screen, confirm and the workers' own (`worker_*`: `WorkerPool.measure`).
    phases: dict[str, float] = field(default_factory=dict)

    @functools.cached_property
    def reference(self) -> tuple[str, Callable[..., Any]] | None:
        """`against`'s name and callable (made when first measuring)."""
        against = self.against
        if isinstance(against, Choice):
            return against.name, against.callable_for(self.signature)
        return None if against is None else (qualified_name(against), against)

    def _add(self, phases: dict[str, float]) -> None:
        for step, seconds in phases.items():
            self.phases[step] = self.phases.get(step, 0.0) + seconds

    def measure(
        self, todo: Sequence[Choice], finished: OnDone, best_ms: Callable[[], float]
    ) -> dict[str, BenchmarkResult]:
        """Compile, verify and time `todo`; each result by digest, in order, each also given to
        `finished` when done. `best_ms`: the lowest cost the other ranks of a job measured now.

        While a CUDA graph captures the inputs, only the workers measure (nothing may run on this
        process's stream); a choice that cannot cross to them is `skipped` then.

        Raises:
            TuningInCapture: the inputs are being captured and the workers cannot measure them.
        """
        with settings.override(**self.overrides):
            in_capture = capturing([*self.inputs, *self.kwargs.values()])
            results: dict[str, BenchmarkResult] = {}
            here = list(todo)
            reason: str | None = "isolation is off"
            if isolation_wanted(self.signature.device, self.isolate):
                # Why every candidate is measured in this process even so (None: none need be).
                reason = "its timer runs in your process" if self.timer is not None else None
                if reason is None and self.kernel is not None:
                    reason = self.kernel.runs_here()
                if reason is None:
                    try:
                        results, here = self._in_workers(todo, finished, best_ms)
                    except IsolationError as error:
                        here, reason = list(todo), str(error)
                        if not in_capture:
                            warn_once(log, reason, _HERE, self.name, reason)
                elif not in_capture:
                    log.info(_HERE, self.name, reason)
                if reason is not None and not in_capture:
                    self.timed_here.update({choice.name: reason for choice in todo})
            if reason is not None and in_capture:
                raise TuningInCapture(
                    f"`{self.name}` met {self.signature} for the first time while a CUDA graph is being "
                    f"captured, and cannot measure its candidates in workers ({reason}): in this "
                    "process they would run inside the capture. Call it once with inputs like these "
                    "before capturing (the warm-up torch.cuda.graph asks for), or tune ahead "
                    "(`kernelpick tune`, KERNELPICK_TABLES)"
                )
            if here and in_capture:
                for choice in here:
                    results[choice.digest] = BenchmarkResult.failed(
                        "skipped",
                        f"not measured: a CUDA graph was being captured ({self.timed_here[choice.name]})",
                    )
                    finished(choice.digest, results[choice.digest])
            elif here:
                results.update(self._here(here, finished, best_ms))
        if self.reference is not None:
            self.checked_against = self.reference[0]
        return {choice.digest: results[choice.digest] for choice in todo if choice.digest in results}

    def _compile(
        self, choices: Sequence[Choice], example: Example, phases: dict[str, float], **options: Any
    ) -> list[CompileOutcome]:
        """`compile_choices` (`options`: its own), its seconds in `phases["compile"]`."""
        started = time.perf_counter()
        options.update(phases=phases, workers=self.kernel and self.kernel.workers)
        try:
            return compile_choices(choices, example, self.signature, **options)
        finally:
            phases["compile"] = time.perf_counter() - started

    def _in_workers(
        self, todo: Sequence[Choice], finished: OnDone, best_ms: Callable[[], float]
    ) -> tuple[dict[str, BenchmarkResult], list[Choice]]:
        """Measure in workers what of `todo` can cross to them; their results, and the choices that
        cannot (a lock or an open file in them, say), each with its reason in `timed_here`.

        Raises:
            IsolationError: nothing can be measured in workers (something cannot cross, no worker starts).
        """
        inputs, kwargs = self.inputs, self.kwargs
        payloads: dict[str, str] = {}
        compiling: list[Choice] = []  # what crosses once compiled here
        others: list[Choice] = []  # what crosses and the workers compile
        here: list[Choice] = []
        for choice in todo:
            compiled_here = compiles_without_user_code(choice)
            try:
                portable = (
                    choice.portable(inputs, kwargs)
                    if isinstance(choice, ConfigChoice)
                    else PortableChoice(choice, self.signature, compiled_here)
                )
                payloads[choice.digest] = values.encode(portable)
            except IsolationError as error:
                here.append(choice)
                self.timed_here[choice.name] = str(error)
            else:
                (compiling if compiled_here else others).append(choice)
        if not payloads:
            return {}, here
        device = self.signature.device
        label = f"compiling {self.name}" if compiling else f"selecting {self.name} in workers"
        phases: dict[str, float] = {}
        outcomes: list[CompileOutcome] = []
        with (
            tempfile.TemporaryDirectory(prefix="kernelpick-") as payload,  # integer tensors' values
            TuningProgress(label, total=len(payloads) + len(compiling)) as progress,
        ):
            done = progress.on_done(finished)
            feed = feed_for(device)  # the workers start while the choices compile
            submitted, described = threading.Event(), threading.Event()

            def ready(index: int) -> None:  # a worker can load it from Triton's cache now
                feed.put(compiling[index].digest)
                progress.advance()

            def describe_meanwhile() -> None:  # in the compile thread, while its children compile
                submitted.set()
                described.wait()

            def compile_all(stop: threading.Event) -> None:
                # Compiling binds each choice's arguments to the call's own inputs, a template's
                # output and scratch space to stand-ins without memory (`TemplateChoice.compile_job`).
                try:
                    outcomes[:] = self._compile(
                        compiling,
                        Example(inputs, kwargs, written=()),
                        phases,
                        meanwhile=describe_meanwhile,
                        mode="process",
                        on_ready=ready,
                        timeout_s=settings.current().compile_timeout_s,
                        stop=stop,
                    )
                finally:
                    submitted.set()
                    feed.close()

            with compiling_beside(compile_all):
                try:
                    # After Triton's code generation for every config, which holds the GIL: the
                    # access analysis then runs beside the children compiling, not against it.
                    submitted.wait()
                    problem = self._problem(Path(payload), phases)
                finally:
                    described.set()
                measured = measure_in_workers(
                    problem,
                    payloads,
                    [choice.digest for choice in others],
                    device,
                    feed=feed,
                    on_done=done,
                    phases=phases,
                    best_ms=best_ms,
                )
            self._add(phases)
            for choice, outcome in zip(compiling, outcomes):
                if not outcome.ok:
                    measured[choice.digest] = BenchmarkResult.failed(
                        outcome.status, outcome.message, outcome.seconds
                    )
                    progress.advance()
                    done(choice.digest, measured[choice.digest])
        return _with_compile_seconds(compiling, outcomes, measured), here

    def _problem(self, payload: Path, phases: dict[str, float]) -> Problem:
        """What the workers measure on: the arguments as data, what a run may write and when it is
        restored, and what outputs are checked against.

        Raises:
            IsolationError: an argument, the reference or the kernel cannot be described as data.
        """
        inputs, kwargs, against = self.inputs, self.kwargs, self.against
        reference = PortableChoice(against, self.signature) if isinstance(against, Choice) else against
        if self.kernel is not None:  # the kernel crosses once, its configs without it (`portable`)
            fields: dict[str, Any] = {
                "keeping": self.kernel.keeping(inputs, kwargs, phases),
                "kernel": values.encode(self.kernel.fn),
            }
        else:
            fields = {
                "input_gen": None if self.input_gen is None else values.encode(self.input_gen),
                "reference_name": "" if self.reference is None else self.reference[0],
                "reference": None if reference is None else values.encode(reference),
                "tolerance": None if self.tolerance is None else (self.tolerance.rtol, self.tolerance.atol),
            }
        # A selection's example inputs are new values (`new_values`): the worker makes integer
        # tensors' too, unless `input_gen` makes them from the real ones.
        real_values = self.kernel is not None or self.input_gen is not None
        return Problem.describe(
            self.signature.device,
            inputs,
            kwargs,
            payload if real_values else None,
            # torch's TF32 switch decides what the reference computes and how closely a float32
            # output must match it: the worker must see the caller's.
            tf32=tf32_allowed(),
            reference_digest=self.reference_digest,
            patience=current_patience(),
            **fields,
        )

    def _here(
        self, todo: Sequence[Choice], finished: OnDone, best_ms: Callable[[], float]
    ) -> dict[str, BenchmarkResult]:
        """Compile, verify and time `todo` in this process, on example inputs or the call's arguments."""
        device, inputs, kwargs = self.signature.device, self.inputs, self.kwargs
        tensors = [v for v in (*inputs, *kwargs.values()) if isinstance(v, torch.Tensor)]
        phases: dict[str, float] = {}
        # Tuning never moves the caller's random state, whatever the choices or input_gen draw.
        with (
            preserved_rng(tensors[0].device if tensors else torch.device("cpu")),
            TuningProgress(f"compiling {self.name}", total=2 * len(todo)) as progress,
        ):
            if self.kernel is None:
                example = Example(*new_values(inputs, kwargs, self.input_gen))
                outcomes = self._compile(todo, example, phases)
            else:
                configs = cast(list[ConfigChoice], todo)
                todo, example, outcomes = self.kernel.compiled(configs, inputs, kwargs, self._compile, phases)
            started = time.perf_counter()
            verified = "verifying and benchmarking" if self.reference is not None else "benchmarking"
            progress.advance(len(todo), f"{verified} {self.name}")
            candidates: dict[str, Candidate | BenchmarkResult] = {}
            for choice, outcome in zip(todo, outcomes):
                hooks = choice.hooks(example) if isinstance(choice, ConfigChoice) else None
                call = functools.partial(choice.callable_for, self.signature)
                candidates[choice.digest] = compiled(choice.name, outcome, call, hooks)
                if isinstance(choice, ConfigChoice) and not outcome.ok:
                    choice.failed_to_compile(outcome, hooks)
            measured = Measurement(example, device, self.reference, self.tolerance, tf32_allowed()).measure(
                candidates,
                self.timer or timer_for(device),
                {**budgets_for(device, per_call=self.kernel is None), "best_ms": best_ms},
                reference=self.reference_digest,
                on_done=progress.on_done(finished),
            )
            phases["benchmark"] = time.perf_counter() - started
        self._add(phases)
        return _with_compile_seconds(todo, outcomes, measured)


def _with_compile_seconds(
    compiled: Sequence[Choice], outcomes: Sequence[CompileOutcome], results: dict[str, BenchmarkResult]
) -> dict[str, BenchmarkResult]:
    """`results`, those of the `compiled` candidates with the seconds their compiles took (where known)."""
    for choice, outcome in zip(compiled, outcomes):
        result = results.get(choice.digest)
        if result is not None and outcome.seconds is not None:
            results[choice.digest] = replace(result, compile_s=outcome.seconds)
    return results
