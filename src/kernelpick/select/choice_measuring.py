"""Measuring a selection's choices: in worker processes (each choice that can cross) or here.

The selector decides what to measure; this compiles the choices (every Triton kernel among them at
once), runs each once on example inputs and checks its output against the reference, and times
those that worked: in the workers when isolation is wanted, the choices crossing by value
(`kernelpick.workers`), or in this process for a choice that cannot cross (it holds a lock, say),
a selector with a timer of its own, or where no worker starts.

In workers, the choices whose compiling runs none of the user's code (templates; a library function
has nothing to compile) compile here, in forked compilers, and each goes to the workers as soon as it
compiled: the GPUs time while the rest compile, and each is compiled once for all of a host's GPUs.
A `triton_choice` (whose `bind` is the user's) or a processed choice compiles in the workers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.inputs import ExampleInputs, GivenInputs, InputGen
from kernelpick.bench.measure import Candidate, Checking, Measurement, OnDone, measure
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer, timer_for
from kernelpick.bench.verify import Tolerance, tf32_allowed
from kernelpick.compile.precompile import classify, compiling_beside, current_patience
from kernelpick.console import TuningProgress, warn_once
from kernelpick.device import capturing
from kernelpick.errors import IsolationError, TuningInCapture
from kernelpick.select.choice import Choice, ExternChoice, PortableChoice, compile_choices
from kernelpick.select.signature import Signature
from kernelpick.select.template_choice import TemplateChoice, UnavailableChoice
from kernelpick.tensors import preserved_rng
from kernelpick.workers import values
from kernelpick.workers.plan import isolation_wanted
from kernelpick.workers.pool import Feed
from kernelpick.workers.request import (
    Problem,
    feed_for,
    measure_in_workers,
    payload_folder,
    start_workers_for,
)

log = logging.getLogger("kernelpick.select")


@dataclass
class ChoiceMeasuring:
    """How one selection measures its choices for one signature: the reference outputs are checked
    against (its name and callable, and as a worker gets it), the selector's options, and the
    candidate kept unless clearly beaten. `finished` is given each choice's digest and result as it
    is done with (the selection stores it then). After `measure`, `timed_here` names each choice
    measured in this process although isolation was wanted, with the reason."""

    name: str
    signature: Signature
    reference: tuple[str, Callable[..., Any]] | None
    portable_reference: Any
    input_gen: InputGen | None = None
    tolerance: Tolerance | None = None
    timer: Timer | None = None
    isolate: bool | None = None
    reference_digest: str | None = None
    finished: OnDone | None = None
    timed_here: dict[str, str] = field(default_factory=dict)
    #: Seconds per step, added up over the measurements of one selection: compile and benchmark
    #: here; in workers compile (here, beside the screening; `compile_*` its parts), prepare (what
    #: the workers compile), screen and confirm, and the workers' own seconds (`worker_*`: see
    #: `WorkerPool.measure`).
    phases: dict[str, float] = field(default_factory=dict)

    def _add(self, phases: dict[str, float]) -> None:
        for step, seconds in phases.items():
            self.phases[step] = self.phases.get(step, 0.0) + seconds

    def measure(
        self, todo: list[Choice], inputs: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, BenchmarkResult]:
        """Compile, verify and time `todo`; each result by digest.

        While a CUDA graph captures the inputs, only the workers measure (each in a process of its
        own, on inputs it makes: nothing runs on this process's stream); a choice that cannot cross
        to them is `skipped` then.

        Raises:
            TuningInCapture: the inputs are being captured and the workers cannot measure them
                (isolation is off, or the inputs or the reference cannot cross).
        """
        in_capture = capturing([*inputs, *kwargs.values()])
        results: dict[str, BenchmarkResult] = {}
        here = list(todo)
        if isolation_wanted(self.signature.device, self.isolate):
            try:
                here = self._in_workers(todo, inputs, kwargs, results)
            except IsolationError as error:
                if in_capture:
                    raise self._in_capture(str(error)) from error
                warn_once(
                    log, str(error), "%s: measuring in this process, not in workers: %s", self.name, error
                )
                here, results = list(todo), {}
                self.timed_here.update({choice.name: str(error) for choice in todo})
        elif in_capture:
            raise self._in_capture("isolation is off")
        if here and in_capture:
            for choice in here:
                results[choice.digest] = BenchmarkResult.failed(
                    "skipped",
                    f"not measured: a CUDA graph was being captured ({self.timed_here[choice.name]})",
                )
                if self.finished is not None:
                    self.finished(choice.digest, results[choice.digest])
        elif here:
            results.update(self._here(here, inputs, kwargs))
        return results

    def _in_capture(self, reason: str) -> TuningInCapture:
        return TuningInCapture(
            f"selector `{self.name}` met {self.signature} for the first time while a CUDA graph is "
            f"being captured, and cannot measure its choices in workers ({reason}): in this process "
            "they would run inside the capture. Call it once with inputs like these before capturing "
            "(the warm-up torch.cuda.graph asks for), or tune ahead (`kernelpick tune`, KERNELPICK_TABLES)"
        )

    def _in_workers(
        self,
        todo: list[Choice],
        inputs: tuple[Any, ...],
        kwargs: dict[str, Any],
        results: dict[str, BenchmarkResult],
    ) -> list[Choice]:
        """Measure what of `todo` can cross to a worker there, into `results`; the choices that cannot
        (they hold a lock or an open file, say) are returned, each with its reason in `timed_here`.

        Raises:
            IsolationError: nothing can be measured in workers (the reference or the inputs cannot
                cross, the selector has a timer of its own, no worker starts).
        """
        if self.timer is not None:
            raise IsolationError("its timer runs in your process")
        payloads: dict[str, str] = {}
        caller_compiles: list[Choice] = []
        others: list[str] = []  # the digests of what crosses and the workers compile
        here: list[Choice] = []
        for choice in todo:
            compiled_here = compiles_here(choice)
            try:
                payloads[choice.digest] = values.encode(PortableChoice(choice, self.signature, compiled_here))
            except IsolationError as error:
                here.append(choice)
                self.timed_here[choice.name] = str(error)
            else:
                if compiled_here:
                    caller_compiles.append(choice)
                else:
                    others.append(choice.digest)
        if not payloads:
            return here
        device = self.signature.device
        start_workers_for(device)  # they start while the choices compile
        with payload_folder() as payload:
            problem = Problem.describe(
                device,
                inputs,
                kwargs,
                Path(payload),
                example="inputs",
                input_gen=None if self.input_gen is None else values.encode(self.input_gen),
                reference=None if self.portable_reference is None else values.encode(self.portable_reference),
                reference_name="" if self.reference is None else self.reference[0],
                tolerance=None if self.tolerance is None else (self.tolerance.rtol, self.tolerance.atol),
                # torch's TF32 switch decides what the reference computes and how closely a float32
                # output must match it: the worker must see the caller's.
                tf32=tf32_allowed(),
                reference_digest=self.reference_digest,
                per_call=True,
                warm_up_ms=settings.current().select_warmup_ms,
                patience=current_patience(),
            )
            with TuningProgress(f"selecting {self.name} in workers", total=len(payloads)) as progress:
                done = progress.on_done(self.finished)
                feed = feed_for(device)
                phases: dict[str, float] = {}
                failed: dict[str, BenchmarkResult] = {}

                def compile_all(stop: threading.Event) -> None:
                    _compile_and_feed(
                        caller_compiles,
                        self.signature,
                        GivenInputs(inputs, kwargs),
                        feed,
                        stop,
                        phases,
                        failed,
                    )

                with compiling_beside(compile_all):
                    measured = measure_in_workers(
                        problem,
                        payloads,
                        others,
                        device,
                        feed=feed,
                        prepare=bool(others),
                        on_done=done,
                        phases=phases,
                    )
                self._add(phases)
                for digest, result in failed.items():
                    done(digest, result)
                results.update({**measured, **failed})
        return here

    def _here(
        self, todo: list[Choice], inputs: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, BenchmarkResult]:
        """Compile, verify and time `todo` in this process, on example inputs."""
        signature, reference = self.signature, self.reference
        device = signature.device
        tensors = [v for v in (*inputs, *kwargs.values()) if isinstance(v, torch.Tensor)]
        # Tuning never moves the caller's random state, whatever the choices or input_gen draw.
        with preserved_rng(tensors[0].device if tensors else torch.device("cpu")):
            example = ExampleInputs(inputs, kwargs, self.input_gen)
            checking = None if reference is None else Checking(reference, self.tolerance, tf32_allowed())
            measurement = Measurement(example, device, checking)
            results: dict[str, BenchmarkResult] = {}
            with TuningProgress(f"compiling {self.name}", total=2 * len(todo)) as progress:
                started = time.perf_counter()
                outcomes = compile_choices(todo, example, signature)
                self._add({"compile": time.perf_counter() - started})
                started = time.perf_counter()
                progress.advance(len(todo), f"verifying and benchmarking {self.name}")
                candidates = []
                done = progress.on_done(self.finished)
                for choice, outcome in zip(todo, outcomes):
                    try:
                        if not outcome.ok:
                            raise _Failed(BenchmarkResult.failed(outcome.status, outcome.message))
                        call = choice.callable_for(signature)
                    except _Failed as failed:
                        results[choice.digest] = failed.result
                        done(choice.digest, failed.result)
                        continue
                    except Exception as error:
                        results[choice.digest] = BenchmarkResult.failed(*classify(error))
                        done(choice.digest, results[choice.digest])
                        continue
                    candidates.append(Candidate(choice.name, choice.digest, call))
                results.update(
                    measure(
                        candidates,
                        measurement,
                        self.timer or timer_for(device),
                        budgets_for(device, per_call=True),
                        reference=self.reference_digest,
                        warm_up_ms=settings.current().select_warmup_ms,
                        on_done=done,
                    )
                )
                self._add({"benchmark": time.perf_counter() - started})
        return {c.digest: results[c.digest] for c in todo}


def compiles_here(choice: Choice) -> bool:
    """Whether `choice` compiles in the caller when it is measured in workers: when compiling it runs
    none of the user's code (a template's own generated binding; a library function has nothing to
    compile). A `triton_choice`'s `bind` and a processed choice's `before` are the user's: those
    choices compile in the workers, where a crash or a hang in them is only that choice's."""
    return isinstance(choice, (TemplateChoice, ExternChoice, UnavailableChoice))


def _compile_and_feed(
    choices: list[Choice],
    signature: Signature,
    given: GivenInputs,
    feed: Feed,
    stop: threading.Event,
    phases: dict[str, float],
    failed: dict[str, BenchmarkResult],
) -> None:
    """Compile `choices` in forked compilers, feeding each one's digest to the workers as soon as it
    compiled (what needs no compiling at once), so the GPUs time while the compilers run and a choice
    is compiled once for all of a host's GPUs; each choice that did not compile goes into `failed`,
    and the seconds it took into `phases["compile"]`. The feed is closed at the end, whatever happens.

    Compiling binds each choice's arguments to the call's own inputs (`given`), its output and scratch
    space to stand-ins without memory (`TemplateChoice.compile_job`).
    """
    started = time.perf_counter()
    try:
        outcomes = compile_choices(
            choices,
            given,
            signature,
            on_ready=lambda index: feed.put(choices[index].digest),
            timeout_s=settings.current().compile_timeout_s,
            stop=stop,
            phases=phases,
        )
        for choice, outcome in zip(choices, outcomes):
            if not outcome.ok:
                failed[choice.digest] = BenchmarkResult.failed(
                    outcome.status, outcome.message, outcome.seconds
                )
    finally:
        phases["compile"] = time.perf_counter() - started
        feed.close()


class _Failed(Exception):
    """A choice that failed before it could be measured, with its result."""

    def __init__(self, result: BenchmarkResult) -> None:
        self.result = result
