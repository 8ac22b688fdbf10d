"""Measuring candidates on one problem: a first run each, checked, then the timing of those that worked."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import benchmark, classify_run_error
from kernelpick.bench.inputs import Example
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer, UserBenchTimer, run_once
from kernelpick.bench.verify import Expected, Tolerance
from kernelpick.compile.precompile import CompileOutcome, classify
from kernelpick.device import DeviceInfo

#: Called with a candidate's digest and result as each is done with.
OnDone = Callable[[str, BenchmarkResult], object]
#: Seconds a GPU stays warm after timed work: a measurement starting sooner does not warm it up again
#: (docs/design.md, clock_settle).
WARM_FOR_S = 5.0
_warm_until: dict[DeviceInfo, float] = {}  # by device: when a measurement must warm it up again


@dataclass(frozen=True, slots=True)
class Hooks:
    """The user's Python around each run of a tuned kernel (Triton's hooks): each `before(named)` before
    a run, `after(named, exception=...)` after it. A candidate with hooks is never sent to a worker."""

    before: tuple[Callable[[dict[str, Any]], object], ...] = ()
    after: Callable[..., object] | None = None
    named: Mapping[str, Any] = field(default_factory=dict)  # what the hooks are given

    def failed_before_running(self, error: BaseException, *, before_ran: bool = False) -> None:
        """Tell the hooks about a failure found before any run (a compile error): the `before`
        hooks (unless they ran before it was compiled), then `after` with the failure, as Triton's
        launch that fails to compile calls them."""
        named = dict(self.named)
        for hook in () if before_ran else self.before:
            hook(named)
        if self.after is not None:
            self.after(named, exception=error)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One thing to measure: its name and `call(*args, **kwargs)`, which runs it on the example's
    arguments and returns its output."""

    name: str
    call: Callable[..., Any]
    hooks: Hooks | None = None


def compiled(
    name: str,
    outcome: CompileOutcome | None,
    call: Callable[[], Callable[..., Any]],
    hooks: Hooks | None = None,
) -> Candidate | BenchmarkResult:
    """A candidate to measure, given its compile `outcome` (None: compiled earlier) and `call()`, which
    makes the function timed; or its failure, to compile or in `call()` (a choice's own bug, or a
    rendered kernel that does not load)."""
    if outcome is not None and not outcome.ok:
        return BenchmarkResult.failed(outcome.status, outcome.message, outcome.seconds)
    try:
        return Candidate(name, call(), hooks)
    except Exception as error:
        return BenchmarkResult.failed(*classify(error))


@dataclass(eq=False)
class Measurement:
    """One problem to measure candidates on: the `example` they run on, the `device`, and what outputs
    are checked against: the `reference`'s name and callable (None: not checked), run once however
    many candidates are measured, within `tolerance` (None: by output dtype; `tf32`: float32 products
    may use TF32, as the reference computes them).
    """

    example: Example
    device: DeviceInfo
    reference: tuple[str, Callable[..., Any]] | None = None
    tolerance: Tolerance | None = None
    tf32: bool = False

    @functools.cached_property
    def expected(self) -> Expected | str:
        """The reference's output on the example, prepared for checking, or why the reference failed."""
        assert self.reference is not None
        name, reference = self.reference
        try:
            self.example.restore()
            output = reference(*self.example.args, **self.example.kwargs)
            synchronize(self.device)
            return Expected(output, self.tolerance, self.device.type == "cuda" and self.tf32)
        except Exception as error:
            return f"the reference `{name}` failed on these inputs: {classify_run_error(error)[1]}"

    def first_run(self, candidate: Candidate) -> BenchmarkResult | Run:
        """Run `candidate` once and check its output: its failure, or its timed run to come. Unchecked,
        on an example restored before every run, a first run would tell nothing its timing does not:
        none is made."""
        example = self.example
        if self.reference is None and example.restore_always:
            return Run(candidate, example, restore=True)
        # First: an output may be an input written in place, which restoring the inputs for the
        # reference's run would overwrite.
        checked = self.reference is not None and self.reference[0] != candidate.name
        expected = self.expected if checked else None
        try:
            example.restore()
            output = candidate.call(*example.args, **example.kwargs)
            synchronize(self.device)
        except Exception as error:
            return BenchmarkResult.failed(*classify_run_error(error))
        if isinstance(expected, str):
            return BenchmarkResult.failed("wrong_result", f"not verified: {expected}")
        reason = None if expected is None else expected.why(output)
        if reason is not None:
            return BenchmarkResult.failed("wrong_result", reason)
        return Run(candidate, example, restore=example.changed())

    def measure(
        self,
        candidates: Mapping[str, Candidate | BenchmarkResult],
        timer: Timer,
        budgets: Mapping[str, Any],
        *,
        reference: str | None = None,
        on_done: OnDone | None = None,
    ) -> dict[str, BenchmarkResult]:
        """Run each candidate once (checked against the reference, when there is one), then time those
        that worked (`kernelpick.bench.benchmarker.benchmark`). On a GPU the candidates first run in
        turn for `KERNELPICK_SELECT_WARMUP_MS` (each at least once), unless this process timed
        something on the device in the last `WARM_FOR_S` seconds: its clocks are up.

        Args:
            candidates: what to measure, by digest (`compiled`), or a candidate's failure.
            timer: how to time. The user's `do_bench` (`UserBenchTimer`) gets one round, no warm-up,
                as Triton's does.
            budgets: the keyword arguments of `benchmark()`.
            reference, on_done: as `benchmark()`'s; `on_done` is given the failures before timing too.

        Returns:
            Each candidate's result, by digest, in the candidates' order.
        """
        results: dict[str, BenchmarkResult] = {}
        runs: dict[str, Run] = {}
        for digest, candidate in candidates.items():
            found = candidate if isinstance(candidate, BenchmarkResult) else self.first_run(candidate)
            if isinstance(found, Run):
                runs[digest] = found
            else:
                results[digest] = found
                if on_done is not None:
                    on_done(digest, found)
        warm_up_ms = settings.current().select_warmup_ms
        if isinstance(timer, UserBenchTimer):
            budgets, warm_up_ms = {"screening": budgets["screening"]}, 0.0
        cold = time.monotonic() >= _warm_until.get(self.device, float("-inf"))
        if runs and warm_up_ms > 0 and not self.device.interpreter and cold:
            warm_up(runs.values(), self.device, warm_up_ms)
        results.update(benchmark(runs, timer, on_done=on_done, reference=reference, **budgets))
        if runs:
            _warm_until[self.device] = time.monotonic() + WARM_FOR_S
        return {digest: results[digest] for digest in candidates}


class Run:
    """One candidate as a `Benchmarkable`: restore the example (when it must) and call the hooks
    outside the timing, run the candidate inside it."""

    def __init__(self, candidate: Candidate, example: Example, *, restore: bool) -> None:
        self.name = candidate.name
        self._call = candidate.call
        self._example = example
        self._restore = restore
        self._hooks = candidate.hooks or Hooks()
        self._named = dict(self._hooks.named)
        #: Hooks are the user's Python, to be called at every run: never replayed from a CUDA graph.
        self.capturable = candidate.hooks is None

    def setup(self) -> None:
        if self._restore:
            self._example.restore()
        for hook in self._hooks.before:
            hook(self._named)

    def run(self) -> None:
        try:
            self._call(*self._example.args, **self._example.kwargs)
        except BaseException as error:  # as Triton: the post_hook is told, then the failure goes on
            if self._hooks.after is not None:
                self._hooks.after(self._named, exception=error)
            raise

    def teardown(self) -> None:
        if self._hooks.after is not None:
            self._hooks.after(self._named, exception=None)


def warm_up(runs: Iterable[Run], device: DeviceInfo, milliseconds: float) -> None:
    """Run the candidates in turn for `milliseconds` (each at least once) before any is timed.

    Candidates with the user's hooks are left out (their hooks would run more often than Triton
    runs them), and so is one that fails here: its timing records the failure.
    """
    deadline = time.perf_counter() + milliseconds / 1e3
    warming = [run for run in runs if run.capturable]
    while warming:
        for run in list(warming):
            try:
                run_once(run)
            except Exception:
                warming.remove(run)
        synchronize(device)
        if time.perf_counter() >= deadline:
            return


def synchronize(device: DeviceInfo) -> None:
    """Wait for `device` to finish what was queued (nothing to wait for on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device.index)
