"""`kernelpick.Selector`: the fastest correct implementation of one operation, per input signature.

A call computes its signature key, looks it up in a dictionary and calls the winner bound for that
signature: that is the whole hot path. On a miss, the choices are expanded for the signature, the
ones missing from the result store are precompiled in parallel, run once on example inputs and
checked against the reference, benchmarked through the very callables the hot path will call, and
stored; the fastest that worked wins.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import MEASUREMENT_VERSION, benchmark, budgets_for, classify_run_error
from kernelpick.bench.device import DeviceInfo
from kernelpick.bench.pick import pick
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer, timer_for
from kernelpick.compile.precompile import CompileOutcome, classify
from kernelpick.errors import ArgumentError, ConfigError, NoValidChoices, TuningRequired
from kernelpick.report import TuningProgress, headline, print_table
from kernelpick.reports.log import log_tuning
from kernelpick.select.choice import Choice, ChoiceSpace, ExternChoice, qualified_name
from kernelpick.select.choice_run import ChoiceRun, synchronize, warm_up
from kernelpick.select.eligibility import SkippedChoice, eligible_spaces
from kernelpick.select.inputs import ExampleInputs, InputGen, preserved_rng
from kernelpick.select.isolated import measure_in_worker, measure_in_workers
from kernelpick.select.record import ChoiceResult, SelectionRecord
from kernelpick.select.searching import NO_SEARCH, SelectionSearch, search_choices
from kernelpick.select.signature import (
    POSITIONAL_KEYS,
    Signature,
    check_measurable,
    checked_signature_key,
    signature_key,
    unhashable_inputs,
    value_key,
)
from kernelpick.select.verify import Checking, Tolerance, compare, tf32_allowed
from kernelpick.store import ResultStore, StoredResult, TuningKey, default_store
from kernelpick.store.deploy import tabled_winner, tuning_required
from kernelpick.store.table import TableEntry
from kernelpick.tune.search.registry import default_strategy_name, strategy_class
from kernelpick.workers import IsolationError, Reference
from kernelpick.workers.plan import isolation_wanted, start_early

log = logging.getLogger("kernelpick.select")

#: Part of every store key: bump when the way choices are verified changes (how they are timed is
#: `MEASUREMENT_VERSION`'s).
SELECTION_VERSION = f"select-1:{MEASUREMENT_VERSION}"

VerifyAgainst = str | Choice | ChoiceSpace | Callable[..., Any] | None


class Selector:
    """Calls the fastest correct choice for each input signature.

    Args:
        name: the operation's name (tables, logs and store rows).
        choices: what to pick from: `kernelpick.extern(...)`, `kernelpick.triton_choice(...)`,
            `kernelpick.template(...)`.
        key: `key(*inputs, **kwargs)`, a hashable value that also selects a tuning (e.g. a global
            flag the choices depend on).
        reference: what outputs are checked against: a choice, the name of one of `choices`, or any
            function of the inputs (default: the first extern choice; none at all when there is no extern).
            When it is one of the choices, it is also what runs unless another choice beats it by
            more than the measured spread of the two (`kernelpick.bench.pick`).
        verify: check every choice's output against the reference; a wrong one gets `wrong_result`.
        input_gen: `input_gen(*inputs, **kwargs)` returns positional example inputs for benchmarking
            (default: random values with the real inputs' metadata).
        tolerance: how far outputs may be from the reference (default: by output dtype).
        store: where to remember results (default: the SQLite store under `KERNELPICK_CACHE_DIR`).
        cache: remember results across processes (also `KERNELPICK_CACHE`).
        timer: how to time (default: CUDA events on GPUs, the wall clock on CPUs).
        isolate: measure choices in worker processes, one per GPU, that a choice crashing, hanging
            or breaking its CUDA context cannot take down (default: `KERNELPICK_ISOLATE`, on with a
            GPU). The selector must then be importable: bound to a module-level name.
        search: how the configs of each template or triton_choice are searched: "exhaustive" (time
            them all), "random", "halving", "pattern" or "model" (default: `KERNELPICK_SEARCH`;
            budgets per space: `KERNELPICK_SEARCH_BUDGET`, `KERNELPICK_SEARCH_SECONDS`). Other
            choices are always timed, then again with each space's best few (`kernelpick.select.searching`).

    Calls take the operation's inputs, `selector(*inputs, **kwargs)`. Tensors select a tuning by
    device, dtype, size, strides and storage offset; other values by value (so they must be
    hashable); `out=` is passed to the choices, which write into it.

    Raises:
        ConfigError: a choice is not a choice, two differ but share a name, the reference is unknown,
            or `search` names no strategy (the message lists those that exist).
    """

    def __init__(
        self,
        name: str,
        choices: Sequence[ChoiceSpace],
        *,
        key: Callable[..., Any] | None = None,
        reference: VerifyAgainst = None,
        verify: bool = True,
        input_gen: InputGen | None = None,
        tolerance: Tolerance | None = None,
        store: ResultStore | None = None,
        cache: bool = True,
        timer: Timer | None = None,
        isolate: bool | None = None,
        search: str | None = None,
    ) -> None:
        self.name = name
        self.isolate = isolate
        self.search = search if search is None else strategy_class(search).name  # checked now
        #: The module that made this selector: where a worker process looks for it by name.
        self.defined_in: str | None = sys._getframe(1).f_globals.get("__name__")
        #: How a worker process finds this selector, when not by a module-level name (set by factories).
        self.importable_as: Reference | None = None
        self.spaces: list[ChoiceSpace] = [_as_space(c) for c in choices]
        if not self.spaces:
            raise ConfigError(f"selector `{name}` has no choices: give it at least one")
        if isinstance(reference, str) and reference not in {s.name for s in self.spaces}:
            raise ConfigError(
                f"reference {reference!r} of selector `{name}` names none of its choices: "
                f"{', '.join(s.name for s in self.spaces)}"
            )
        self.key = key
        self.reference = reference
        self.verify = verify
        self.input_gen = input_gen
        self.tolerance = tolerance
        self.store = store
        self.use_store = cache
        self.timer = timer
        self._calls: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self._lock = threading.RLock()
        self.records: dict[tuple[Any, ...], SelectionRecord] = {}
        self.last_selection: SelectionRecord | None = None
        start_early(isolate)

    # -- the hot path -------------------------------------------------------------------------
    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        # signature_key, inlined: a function call less on every call
        key = POSITIONAL_KEYS[len(inputs)](inputs) if len(inputs) < 9 else signature_key(inputs, {}, None)
        if kwargs:
            key = (key, tuple([(name, value_key(kwargs[name])) for name in sorted(kwargs)]))
        if self.key is not None:
            key = (key, self.key(*inputs, **kwargs))
        try:
            call = self._calls.get(key)
        except TypeError:
            raise ArgumentError(unhashable_inputs(self.name, inputs, kwargs)) from None
        if call is None:
            call = self._select(key, inputs, kwargs)
        return call(*inputs, **kwargs)

    def implementation(self, *inputs: Any, **kwargs: Any) -> Callable[..., Any]:
        """The callable the hot path calls for inputs like these (selecting first if needed)."""
        key = checked_signature_key(self.name, inputs, kwargs, self.key)
        return self._calls.get(key) or self._select(key, inputs, kwargs)

    def tune(self, *inputs: Any, **kwargs: Any) -> SelectionRecord:
        """Select for inputs like these (if not done yet) without running the winner; returns the record."""
        key = checked_signature_key(self.name, inputs, kwargs, self.key)
        if key not in self._calls:
            self._select(key, inputs, kwargs)
        return self.records[key]

    def choices_for(self, *inputs: Any, **kwargs: Any) -> list[Choice]:
        """The choices this selector picks from for inputs like these (expanded for their signature)."""
        return self.expand(Signature.of(inputs, kwargs, self.key))

    def clear(self) -> None:
        """Forget this process's picks (the store keeps its results)."""
        with self._lock:
            self._calls.clear()
            self.records.clear()

    # -- selection ----------------------------------------------------------------------------
    def _select(
        self, key: tuple[Any, ...], inputs: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Callable[..., Any]:
        with self._lock:
            call = self._calls.get(key)
            if call is not None:  # another thread selected meanwhile
                return call
            start = time.perf_counter()
            check_measurable(self.name, inputs, kwargs)
            signature = Signature.of(inputs, kwargs, self.key)
            choices, skipped = self._expand(signature)
            store = self._store()
            source = SELECTION_VERSION if self.verify else f"{SELECTION_VERSION}:unverified"
            tuning_key = TuningKey.make(self.name, source, signature.device, signature.to_data())
            # The store is read once, and only when needed (a deployment table may answer first).
            stored = functools.cache(lambda: store.load(tuning_key) if store is not None else {})
            tabled = self._from_table(key, tuning_key, choices, skipped, signature, start, stored)
            if tabled is not None:
                return tabled
            results = {c.digest: stored()[c.digest].result for c in choices if c.digest in stored()}
            todo = [c for c in choices if c.digest not in results]
            if todo and settings.current().no_tuning:
                raise TuningRequired(
                    tuning_required(
                        f"selector `{self.name}`", str(signature), signature.device.name, len(todo)
                    )
                )
            reference, searched = None, NO_SEARCH
            if todo:
                reference, searched = self._measure_todo(todo, choices, signature, inputs, kwargs, results)
            todo = [c for c in todo if c.digest in results]  # what was timed: a search leaves some out
            ranked = sorted(
                [c for c in choices if c.digest in results], key=lambda c: results[c.digest].cost_ms
            )
            rows = tuple(ChoiceResult(c.name, c.digest, c.description(), results[c.digest]) for c in ranked)
            note = ""
            if any(result.ok for result in results.values()):
                by_digest = {c.digest: c for c in choices}
                chosen = pick(
                    results, self.reference_digest(signature), name=lambda digest: by_digest[digest].name
                )
                note = chosen.note
                ranked.remove(by_digest[chosen.best])
                ranked.insert(0, by_digest[chosen.best])

            def save(pick: str | None) -> None:  # after binding, which may find a winner uncallable
                if store is not None and todo:
                    now = [StoredResult(c.digest, c.description(), results[c.digest]) for c in todo]
                    now = [row for row in now if row.result.storable]
                    store.save(tuning_key, now, pick=pick)

            try:
                winner, call = self._bind_winner(ranked, results, signature, rows)
            except NoValidChoices:  # failures are results too: stored even when nothing can be called
                save(None)
                raise
            save(winner.digest)
            record = SelectionRecord(
                self.name,
                signature,
                signature.device,
                rows,
                winner.name,
                time.perf_counter() - start,
                not todo,
                reference,
                note if winner.digest == ranked[0].digest else "",
                skipped,
                searched.traces,
            )
            self.records[key] = self.last_selection = record
            log_tuning(record)
            if settings.current().print_tables:
                print_table(record.table())
            log.info("selected for %s in %.2f s: %s", self.name, record.seconds, record.summary())
            self._calls[key] = call
            return call

    def _from_table(
        self,
        key: tuple[Any, ...],
        tuning_key: TuningKey,
        choices: list[Choice],
        skipped: tuple[SkippedChoice, ...],
        signature: Signature,
        start: float,
        stored: Callable[[], Mapping[str, StoredResult]],
    ) -> Callable[..., Any] | None:
        """Bind the winner a deployment table gives for this key (`kernelpick.store.deploy`), if any
        (`stored()`: the store's results for it, read when the exact key has no table entry)."""
        by_digest = {c.digest: c for c in choices}
        by_name = {c.name: c for c in choices}

        def choice_of(entry: TableEntry) -> Choice | None:
            # The digest for the exact key; by name for another key, whose rendered choices differ.
            return by_digest.get(entry.candidate) or by_name.get(str(entry.choice.get("name")))

        found = tabled_winner(tuning_key, choice_of, lambda: all(c.digest in stored() for c in choices))
        if found is None:
            return None
        choice, hit = found
        try:
            call = choice.callable_for(signature)
        except Exception as error:  # e.g. a template that does not render for these sizes
            log.warning(
                "the tabled winner %s of %s cannot be called (%s); tuning", choice.name, self.name, error
            )
            return None
        rows = (ChoiceResult(choice.name, choice.digest, choice.description(), hit.entry.result),)
        seconds = time.perf_counter() - start
        record = SelectionRecord(
            self.name, signature, signature.device, rows, choice.name, seconds, True, None, hit.note, skipped
        )
        self.records[key] = self.last_selection = record
        log_tuning(record)
        self._calls[key] = call
        return call

    def _bind_winner(
        self,
        ranked: list[Choice],
        results: dict[str, BenchmarkResult],
        signature: Signature,
        rows: tuple[ChoiceResult, ...],
    ) -> tuple[Choice, Callable[..., Any]]:
        for choice in ranked:
            if not results[choice.digest].ok:
                break
            try:
                return choice, choice.callable_for(signature)
            except Exception as error:  # e.g. a stored winner whose kernel no longer loads
                log.warning(
                    "choice %s of %s won but cannot be called (%s); trying the next",
                    choice.name,
                    self.name,
                    error,
                )
                results[choice.digest] = BenchmarkResult.failed("compile_error", str(error))
        raise NoValidChoices(self._failure_report(signature, rows))

    def expand(self, signature: Signature) -> list[Choice]:
        """Every choice for `signature` whose requirements its device meets, each once.

        Raises:
            ConfigError: two different choices share a name.
            NoValidChoices: no choice applies to the signature.
        """
        return self._expand(signature)[0]

    def _expand(self, signature: Signature) -> tuple[list[Choice], tuple[SkippedChoice, ...]]:
        """`expand`'s choices, and the spaces left out on the device with the reason for each."""
        choices: list[Choice] = []
        by_name: dict[str, Choice] = {}
        digests: set[str] = set()
        spaces, skipped = eligible_spaces(self.spaces, signature.device)
        for space in spaces:
            for choice in space.choices_for(signature):
                if choice.digest in digests:
                    continue  # the same implementation listed twice
                if choice.name in by_name:
                    raise ConfigError(
                        f"selector `{self.name}` has two different choices named {choice.name!r}: give one a name="
                    )
                digests.add(choice.digest)
                by_name[choice.name] = choice
                choices.append(choice)
        if not choices:
            left_out = "".join(f"; skipped {s.name}: {s.reason}" for s in skipped)
            raise NoValidChoices(
                f"no choice of selector `{self.name}` applies to inputs {signature}: every config space "
                f"was empty for them or skipped on this device{left_out}; add a choice that handles them "
                "(an extern, say)"
            )
        return choices, skipped

    def _store(self) -> ResultStore | None:
        if not (self.use_store and settings.current().cache):
            return None
        return self.store if self.store is not None else default_store()

    def reference_digest(self, signature: Signature) -> str | None:
        """The digest of the reference when it is one of the choices: what runs unless clearly beaten."""
        target = self._reference_target()
        if isinstance(target, Choice):
            return target.digest
        if isinstance(target, ChoiceSpace):
            return target.choices_for(signature)[0].digest
        return None  # a function of the inputs: it checks outputs, it is not a choice

    def _reference_target(self) -> Choice | ChoiceSpace | Callable[..., Any] | None:
        """What outputs are checked against (`reference=`, default: the first extern choice)."""
        wanted = self.reference
        if wanted is None:
            return next((s for s in self.spaces if isinstance(s, ExternChoice)), None)
        if isinstance(wanted, str):
            return next(s for s in self.spaces if s.name == wanted)  # checked in __init__
        return wanted

    def _reference(self, signature: Signature) -> tuple[str, Callable[..., Any]] | None:
        """(name, callable) of what outputs are checked against, or None when there is nothing."""
        wanted = self._reference_target()
        if isinstance(wanted, ChoiceSpace) and not isinstance(wanted, Choice):
            wanted = wanted.choices_for(signature)[0]
        if isinstance(wanted, Choice):
            return wanted.name, wanted.callable_for(signature)
        if wanted is None:
            return None
        if callable(wanted):
            return qualified_name(wanted), wanted
        raise ConfigError(
            f"reference of selector `{self.name}` must be a choice, a name or a function, got {wanted!r}"
        )

    def _measure_todo(
        self,
        todo: list[Choice],
        choices: list[Choice],
        signature: Signature,
        inputs: tuple[Any, ...],
        kwargs: dict[str, Any],
        results: dict[str, BenchmarkResult],
    ) -> tuple[str | None, SelectionSearch]:
        """Measure `todo` into `results`: all of it, or what a search of each config space proposes
        and a final round (`kernelpick.select.searching`). Returns the reference's name and the searches."""
        measure = functools.partial(
            self._measure, choices=choices, signature=signature, inputs=inputs, kwargs=kwargs
        )
        strategy = self.search or default_strategy_name()
        if strategy == "exhaustive":
            measured, reference = measure(todo)
            results.update(measured)
            return reference, NO_SEARCH
        found = search_choices(strategy, choices, results, measure, self.reference_digest(signature))
        results.update(found.results)
        return found.reference, found

    def _measure(
        self,
        todo: list[Choice],
        choices: list[Choice],
        signature: Signature,
        inputs: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[dict[str, BenchmarkResult], str | None]:
        if isolation_wanted(signature.device, self.isolate):
            try:
                with TuningProgress(f"selecting {self.name} in workers", total=len(todo)) as progress:
                    results = measure_in_workers(self, todo, signature, inputs, kwargs, progress.advance)
                reference = self._reference(signature) if self.verify else None
                return results, None if reference is None else reference[0]
            except IsolationError as error:
                log.warning("%s: measuring in this process, not in workers: %s", self.name, error)
        tensors = [v for v in (*inputs, *kwargs.values()) if isinstance(v, torch.Tensor)]
        # Tuning never moves the caller's random state, whatever the choices or input_gen draw.
        with preserved_rng(tensors[0].device if tensors else torch.device("cpu")):
            example = ExampleInputs(inputs, kwargs, self.input_gen)
            return self.measure_here(todo, choices, signature, self.checking_for(choices, signature, example))

    def measure_in_worker(self, request: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """Measure choices for a caller in another process (see `kernelpick.select.isolated`)."""
        return measure_in_worker(self, request)

    def measure_here(
        self,
        todo: list[Choice],
        choices: list[Choice],
        signature: Signature,
        checking: Checking,
        budgets: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, BenchmarkResult], str | None]:
        """Compile, verify and time `todo` here on `checking`'s example inputs; `budgets` as for
        `Autotuner._benchmark`."""
        device = signature.device
        results: dict[str, BenchmarkResult] = {}
        example, reference = checking.example, checking.reference
        with TuningProgress(f"compiling {self.name}", total=2 * len(todo)) as progress:
            outcomes = self.precompile_choices(todo, example, signature)
            progress.advance(len(todo), f"verifying and benchmarking {self.name}")
            runs: list[ChoiceRun] = []
            for choice, outcome in zip(todo, outcomes):
                result, run = self._first_run(
                    choice, outcome, example, signature, reference, checking.expected, checking.error
                )
                if run is None:
                    assert result is not None
                    results[choice.digest] = result
                else:
                    runs.append(run)
            if not device.interpreter:
                warm_up(runs, device)
            keep = self.reference_digest(signature)
            measured = benchmark(
                runs,
                self.timer or timer_for(device),
                on_done=progress.advance,
                reference=next((i for i, run in enumerate(runs) if run.digest == keep), None),
                **(budgets or budgets_for(device, per_call=True)),
            )
            results.update({run.digest: r for run, r in zip(runs, measured)})
        return results, None if reference is None else reference[0]

    def checking_for(self, choices: list[Choice], signature: Signature, example: ExampleInputs) -> Checking:
        """The reference's output on `example` (if verifying), and what else checking a choice takes.

        A worker keeps it for the requests of one problem: the reference then runs once, not
        once per candidate (for the largest GEMM of the suite, a 5 ms product each time).
        """
        reference = self._reference(signature) if self.verify else None
        expected, error = self._expected(reference, example, signature.device)
        return Checking(example, reference, expected, error)

    def precompile_choices(
        self, todo: list[Choice], example: ExampleInputs, signature: Signature
    ) -> list[CompileOutcome]:
        """Compile `todo` for `signature`, many at once; a choice's own failure is its outcome."""

        def compile_one(choice: Choice) -> CompileOutcome:
            try:
                return choice.precompile(example, signature)
            except Exception as error:  # a choice's own bug is that choice's failure
                return CompileOutcome(*classify(error))

        workers = min(settings.compile_workers(), len(todo))
        if workers <= 1:
            return [compile_one(c) for c in todo]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kernelpick-select") as pool:
            # Each task runs in a copy of this thread's context, so that scoped settings
            # (settings.override: the cache dir, ...) hold in the workers too.
            futures = [pool.submit(contextvars.copy_context().run, compile_one, c) for c in todo]
            return [f.result() for f in futures]

    def _expected(
        self, reference: tuple[str, Callable[..., Any]] | None, example: ExampleInputs, device: DeviceInfo
    ) -> tuple[Any, str | None]:
        if reference is None:
            return None, None
        try:
            example.restore()
            expected = reference[1](*example.args, **example.kwargs)
            synchronize(device)
        except Exception as error:
            return (
                None,
                f"the reference `{reference[0]}` failed on these inputs: {classify_run_error(error)[1]}",
            )
        return expected, None

    def _first_run(
        self,
        choice: Choice,
        outcome: CompileOutcome,
        example: ExampleInputs,
        signature: Signature,
        reference: tuple[str, Callable[..., Any]] | None,
        expected: Any,
        reference_error: str | None,
    ) -> tuple[BenchmarkResult | None, ChoiceRun | None]:
        """Run a compiled choice once and check its output; a failure is returned as a result."""
        if not outcome.ok:
            return BenchmarkResult.failed(outcome.status, outcome.message), None
        try:
            call = choice.callable_for(signature)
        except Exception as error:
            return BenchmarkResult.failed(*classify(error)), None
        try:
            example.restore()
            output = call(*example.args, **example.kwargs)
            synchronize(signature.device)
        except Exception as error:
            return BenchmarkResult.failed(*classify_run_error(error)), None
        writes_inputs = example.changed()
        if reference is not None and reference[0] != choice.name:
            if reference_error is not None:
                return BenchmarkResult.failed("wrong_result", f"not verified: {reference_error}"), None
            tf32 = signature.device.type == "cuda" and tf32_allowed()
            reason = compare(output, expected, tolerance=self.tolerance, tf32=tf32)
            if reason is not None:
                return BenchmarkResult.failed("wrong_result", reason), None
        return None, ChoiceRun(choice, call, example, restore=writes_inputs)

    def _failure_report(self, signature: Signature, rows: Sequence[ChoiceResult]) -> str:
        lines = [
            f"all {len(rows)} choices of selector `{self.name}` failed for inputs {signature} on {signature.device.label}:"
        ]
        lines += [f"  {r.name}: {r.result.status}: {headline(r.result.message, 300)}" for r in rows]
        lines.append(
            "fix the choices or call with inputs they support; each reason is what compiling, running or verifying said"
        )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Selector({self.name!r}, choices=[{', '.join(s.name for s in self.spaces)}])"


def _as_space(choice: Any) -> ChoiceSpace:
    if isinstance(choice, ChoiceSpace):
        return choice
    raise ConfigError(
        f"{choice!r} is not a choice: wrap functions with kernelpick.extern, Triton kernels with "
        "kernelpick.triton_choice and templates with kernelpick.template"
    )
