"""`kernelpick.Selector`: the fastest correct implementation of one operation, per input signature."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from kernelpick import settings
from kernelpick.bench.inputs import InputGen
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer
from kernelpick.bench.verify import VERIFICATION_VERSION, Tolerance
from kernelpick.calls import record_selector_call
from kernelpick.console import warn_once
from kernelpick.engine.choice import Choice, ChoiceSpace, ExternChoice
from kernelpick.engine.choice_measuring import ChoiceMeasuring
from kernelpick.engine.eligibility import SkippedChoice, eligible_spaces, tabled_choice
from kernelpick.engine.record import CandidateResult, TuningRecord, failure_report, report_tuning
from kernelpick.engine.signature import (
    POSITIONAL_KEYS,
    Calls,
    Signature,
    check_measurable,
    checked_signature_key,
    positional_caller,
    signature_key,
    unhashable_inputs,
    value_key,
)
from kernelpick.engine.tuning import Tuning, in_captures_too, measured_as, result_store
from kernelpick.errors import ArgumentError, ConfigError, NoValidChoices
from kernelpick.search.registry import strategy_class
from kernelpick.search.spec import SearchArgument
from kernelpick.select.background import Pending, provisional_call
from kernelpick.select.selector_op import SelectorOp
from kernelpick.store import ResultStore, TuningKey
from kernelpick.store.table import TableEntry
from kernelpick.workers.plan import start_early

log = logging.getLogger("kernelpick.select")

#: Signatures differing only in float arguments' values a selector tunes before it warns.
FLOAT_VALUES_WARNED = 3


Expanded = tuple[dict[str, Choice], tuple[SkippedChoice, ...]]  # a signature's choices, the spaces left out


_NO_GRADIENT = (
    "selector `%s` returned an output that does not require grad for inputs that do: its pick, %s, is "
    "one autograd cannot differentiate (a Triton kernel), so gradients through it are lost. Give it a "
    "backward in a torch.autograd.Function that calls the selector, or call it under torch.no_grad()"
)


class Selector:
    """Calls the fastest correct choice for each input signature.

    Args:
        name: the operation's name (tables, logs and store rows).
        choices: what to pick from: `kernelpick.extern(...)`, `kernelpick.triton_choice(...)`,
            `kernelpick.template(...)`.
        key: `key(*inputs, **kwargs)`, a hashable value, not a tensor, that also selects a tuning
            (e.g. a global flag the choices depend on).
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
            GPU); choices cross by value, and one that cannot be serialized is measured here
            (`timed_here` says why).
        search: how the configs of each template or triton_choice are searched: "exhaustive" (time
            them all), "random", "halving", "pattern" or "model", with options as "model(budget=0.1)"
            or {"name": "model", ...} (docs/search.md lists them and their budgets; default:
            `KERNELPICK_SEARCH`). Other choices are always timed, then again with each space's best few.
        check: `check(*inputs, **kwargs)` raises for inputs the operation does not take (shapes that
            do not fit, say), before a new signature is tuned: nothing is compiled or stored for them.
        background: a new signature's first calls run the reference while the choices are tuned in
            a thread (`kernelpick.select.background`; default: `KERNELPICK_BACKGROUND`).

    Calls take the operation's inputs, `selector(*inputs, **kwargs)`. Tensors select a tuning by
    device, dtype, size, strides and storage offset; other values by value (so they must be
    hashable); `out=` is passed to the choices, which write into it.

    Raises:
        ConfigError: the name is empty, a choice is not a choice, two differ but share a name, the reference is unknown,
            or `search` names no strategy (the message lists those that exist).
    """

    def __init__(
        self,
        name: str,
        choices: Sequence[ChoiceSpace],
        *,
        key: Callable[..., Any] | None = None,
        reference: str | Choice | ChoiceSpace | Callable[..., Any] | None = None,
        verify: bool = True,
        input_gen: InputGen | None = None,
        tolerance: Tolerance | None = None,
        store: ResultStore | None = None,
        cache: bool = True,
        timer: Timer | None = None,
        isolate: bool | None = None,
        search: SearchArgument | None = None,
        check: Callable[..., object] | None = None,
        background: bool | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(
                f"a selector's name must be a non-empty string (it keys the store), got {name!r}"
            )
        self.name = name
        self.check = check
        self.background = background
        self.isolate = isolate
        self.search = search if search is None else strategy_class(search).name  # checked now
        #: The choices last measured in this process although isolation was wanted, with the reason.
        self.timed_here: dict[str, str] = {}
        self.spaces: list[ChoiceSpace] = list(choices)  # read once: a generator is read to its end
        for choice in self.spaces:
            if not isinstance(choice, ChoiceSpace):
                raise ConfigError(
                    f"{choice!r} is not a choice: wrap functions with kernelpick.extern, Triton kernels with "
                    "kernelpick.triton_choice and templates with kernelpick.template"
                )
        if not self.spaces:
            raise ConfigError(f"selector `{name}` has no choices: give it at least one")
        if not (
            reference is None or isinstance(reference, (str, Choice, ChoiceSpace)) or callable(reference)
        ):
            raise ConfigError(
                f"reference of selector `{name}` must be a choice, the name of one or a function, "
                f"got {reference!r}"
            )
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
        self._calls = Calls()
        self._lock = threading.RLock()
        self.records: dict[tuple[Any, ...], TuningRecord] = {}
        self.last_selection: TuningRecord | None = None
        self._pending: dict[tuple[Any, ...], Pending[Callable[..., Any]]] = {}  # tuned in the background
        self._float_values: dict[tuple[Any, ...], int] = {}  # signatures met, by those with floats as 0.0
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
            output = self._select(key, inputs, kwargs)(*inputs, **kwargs)
            if torch.is_grad_enabled():  # a signature's first call: the hot path tests nothing
                self._check_gradients(output, (*inputs, *kwargs.values()))
            return output
        return call(*inputs, **kwargs)

    def positional(self, count: int, differentiable: Callable[..., Any] | None = None) -> Callable[..., Any]:
        """This selector's call for callers that always pass `count` positional inputs (`kernelpick.ops`):
        the same hot path without the selector's own frame and argument packing.

        Args:
            count: how many positional inputs every call passes.
            differentiable: where given, calls whose inputs need gradients (grad mode on and one of
                them requires grad) go to it instead (`kernelpick.ops`: the operator, through autograd);
                a call the front answers is not tested (`positional_caller`).

        Raises:
            ConfigError: `differentiable` for a selector with a `key` function, whose call is its own.
        """
        if self.key is None:
            return positional_caller(count)(self._calls, self, differentiable)
        if differentiable is not None:
            raise ConfigError(
                f"selector `{self.name}` has a `key` function, so its positional call is the selector itself, "
                "which sends no call elsewhere: leave `differentiable` out and test for gradients before "
                "calling it"
            )
        return self

    def implementation(self, *inputs: Any, **kwargs: Any) -> Callable[..., Any]:
        """The callable the hot path calls for inputs like these (selecting first if needed)."""
        key = checked_signature_key(self.name, inputs, kwargs, self.key)
        return self._calls.get(key) or self._select(key, inputs, kwargs)

    def tune(self, *inputs: Any, **kwargs: Any) -> TuningRecord:
        """Select for inputs like these (if not done yet) without running the pick; returns the record."""
        key = checked_signature_key(self.name, inputs, kwargs, self.key)
        if key not in self._calls:
            self._select(key, inputs, kwargs)
        return self.records[key]

    def choices_for(self, *inputs: Any, **kwargs: Any) -> list[Choice]:
        """The choices this selector picks from for inputs like these (expanded for their signature)."""
        return self.expand(Signature.of(inputs, kwargs, self.key))

    def as_op(
        self, name: str, *, fake: Callable[..., Any] | None = None, schema: str | None = None
    ) -> SelectorOp:
        """This selector as the PyTorch operator `name` ("namespace::name"), for `torch.compile` and
        `torch.export`: an exported program calls the operator, which selects when it runs; a compiled
        one the pick itself for static sizes (docs/ops.md). Eager calls stay the selector's own.

        Args:
            name: the operator's name; it becomes `torch.ops.<namespace>.<name>`.
            fake: a function of the same inputs returning empty tensors shaped, strided and typed like
                the output (`torch.empty_like(x)`); default: the reference (an `extern` function, or the
                function given as `reference=`) run on fake tensors, which suits a reference of PyTorch
                operations whose output is laid out as every choice's (Inductor checks strides).
            schema: the operator's schema ("(Tensor a, Tensor b) -> Tensor"); default: from the
                annotations of `fake`, else of the reference function.

        Returns:
            A `SelectorOp`: call it like the selector.

        Raises:
            OperatorError: no fake can be had, no schema can be inferred, the schema does not parse or
                writes an input, or the name is taken.
        """
        return SelectorOp(self, name, fake=fake, schema=schema)

    def clear(self) -> None:
        """Forget this process's picks (the store keeps its results)."""
        with self._lock:
            self._calls.clear()
            self.records.clear()
            self._pending.clear()

    # -- selection ----------------------------------------------------------------------------
    def _select(
        self, key: tuple[Any, ...], inputs: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Callable[..., Any]:
        if key not in self._pending and any(type(v) is float for v in (*inputs, *kwargs.values())):
            self._count_float_values(key, inputs, kwargs)
        current = settings.current()
        background = current.background if self.background is None else self.background
        if background or key in self._pending:  # tuning in the background
            call = provisional_call(self, key, inputs, kwargs, background)
            if call is not None:
                return call
        with self._lock:
            call = self._calls.get(key)
            if call is not None:  # another thread selected meanwhile
                return call
            start = time.perf_counter()
            if self.check is not None:
                self.check(*inputs, **kwargs)
            check_measurable(self.name, inputs, kwargs)
            if current.record_path is not None:  # KERNELPICK_RECORD
                record_selector_call(current.record_path, self, inputs, kwargs, key)
            signature = Signature.of(inputs, kwargs, self.key)
            source = VERIFICATION_VERSION if self.verify else f"{VERIFICATION_VERSION}:unverified"
            store_key = TuningKey.make(self.name, source, signature.device, signature.to_data())
            store = result_store(self.use_store, self.store)
            with Tuning(
                f"selector `{self.name}`", str(signature), store_key, store, signature.device.name, start
            ) as tuning:
                return self._tune(key, tuning, signature, inputs, kwargs)

    def _check_gradients(self, output: Any, inputs: Sequence[Any]) -> None:
        """Warn once when inputs that require grad gave an output that does not: a Triton kernel's
        (autograd cannot see into it), where an extern's output would have carried the gradient."""
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        floats = [o for o in outputs if isinstance(o, torch.Tensor) and o.is_floating_point()]
        if not floats or any(o.requires_grad for o in floats):
            return
        if any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs):
            record = self.last_selection
            warn_once(
                log, f"gradients of {self.name}", _NO_GRADIENT, self.name, record.best if record else "?"
            )

    def _count_float_values(
        self, key: tuple[Any, ...], inputs: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Warn once a selector has met `FLOAT_VALUES_WARNED` signatures that differ only in the values
        of float arguments: each new value is tuned, so a value that changes every call tunes every call."""
        plain = tuple(0.0 if type(v) is float else v for v in inputs)
        named = {name: 0.0 if type(v) is float else v for name, v in kwargs.items()}
        alike = (signature_key(plain, named, None), key[1] if self.key is not None else None)
        seen = self._float_values[alike] = self._float_values.get(alike, 0) + 1
        if seen == FLOAT_VALUES_WARNED:
            message = (
                "selector `%s` is tuned again for each new value of its float arguments (%d signatures so "
                "far differ only in them): a value that changes every call, a learning rate or a temperature, "
                "tunes every call. Pass it in a tensor (a 0-d tensor selects by its dtype and device alone)"
            )
            warn_once(log, f"float values of {self.name}", message, self.name, seen)

    def _tune(
        self,
        key: tuple[Any, ...],
        tuning: Tuning,
        signature: Signature,
        inputs: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Callable[..., Any]:
        """Select for one signature (the lock held): from a table, else from the store's results and
        what is measured now (`Tuning.settle`); bind the pick and record why it won."""
        # The choices are expanded (templates rendered) only when a table does not answer.
        expanded = functools.cache(lambda: self._expand(signature))
        tabled = self._from_table(key, tuning, signature, expanded)
        if tabled is not None:
            return tabled
        started = time.perf_counter()
        by_digest, skipped = expanded()
        tuning.phases["expand"] = time.perf_counter() - started
        against = self._reference_target(signature)
        kept = against.digest if isinstance(against, Choice) else None  # what runs unless clearly beaten
        tuning.verified_against = kept if self.verify else None
        ranking = measured_as([*inputs, *kwargs.values()])
        measuring = ChoiceMeasuring(
            self.name,
            signature,
            inputs,
            kwargs,
            cast("Choice | Callable[..., Any] | None", against) if self.verify else None,
            input_gen=self.input_gen,
            tolerance=self.tolerance,
            timer=self.timer,
            isolate=self.isolate,
            reference_digest=kept,
            phases=tuning.phases,
        )
        self.timed_here = measuring.timed_here  # filled as it measures: a tuning that raises leaves its own
        settled = tuning.settle(by_digest, self.search, measuring, ranking)
        results = dict(settled.results)
        by_cost = sorted(
            [c for d, c in by_digest.items() if d in results], key=lambda c: results[c.digest].cost(ranking)
        )
        bound: tuple[Choice, Callable[..., Any]] | None = None  # the first that works and can be called
        for choice in sorted(by_cost, key=lambda c: c.digest != settled.pick):  # the pick first, then by cost
            if not results[choice.digest].ok:
                break
            try:
                bound = choice, choice.callable_for(signature)
                break
            except Exception as error:  # e.g. a stored pick whose kernel no longer loads
                won = "choice %s of %s won but cannot be called (%s); trying the next"
                log.warning(won, choice.name, self.name, error)
                results[choice.digest] = BenchmarkResult.failed("compile_error", str(error))
        # Stored after binding, which may find a pick uncallable, and also when nothing can be called.
        tuning.save(results, settled.fresh, None if bound is None else bound[0].digest)
        by_cost.sort(key=lambda c: results[c.digest].cost(ranking))  # with what binding found
        rows = tuple(
            CandidateResult(c.digest, c.description(), results[c.digest], name=c.name) for c in by_cost
        )
        if bound is None:
            raise NoValidChoices(
                failure_report(
                    f"choices of selector `{self.name}` failed for inputs {signature} on {signature.device.label}",
                    [(r.name, r.result) for r in rows],
                    "fix the choices or call with inputs they support; each reason is what compiling, running or verifying said",
                )
            )
        pick_choice, call = bound
        bind = lambda digest: by_digest[digest].callable_for(signature)  # noqa: E731
        call = in_captures_too(call, pick_choice.digest, results, kept, ranking, bind, signature.device.type)
        if settled.picked_by and pick_choice.digest != settled.pick:
            theirs = by_digest[settled.pick].name if settled.pick in by_digest else settled.pick
            why = f"{settled.picked_by} found no choice that works"
            if theirs:
                why = f"the pick of {settled.picked_by}, {theirs}, cannot be called here"
            log.warning("%s: %s: running %s, unlike %s", self.name, why, pick_choice.name, settled.picked_by)
        record = TuningRecord.of_selection(
            self.name,
            key,
            signature,
            rows,
            pick_choice.digest,
            tuning.seconds,
            not settled.fresh,
            phases=tuning.phases,
            note=settled.note if pick_choice.digest == settled.pick else "",
            searches=settled.searches,
            timed_here=dict(self.timed_here),
            reference=measuring.checked_against,
            skipped=skipped,
            measured_as=ranking,
        )
        self.records[key] = self.last_selection = record
        report_tuning(record)
        log.info("selected for %s in %.2f s: %s", self.name, record.seconds, record.summary())
        self._calls[key] = call
        return call

    def _from_table(
        self, key: tuple[Any, ...], tuning: Tuning, signature: Signature, expanded: Callable[[], Expanded]
    ) -> Callable[..., Any] | None:
        """Bind the pick a deployment table gives for this key (`kernelpick.store.deploy`), if any: a
        template's pick is rendered alone, and every choice (`expanded()`) and the spaces the device can
        run are made only when asked for."""
        eligible = functools.cache(lambda: eligible_spaces(self.spaces, signature.device))
        found_for: dict[int, Choice | None] = {}

        def choice_of(entry: TableEntry) -> Choice | None:
            # The digest for the exact key; by name for another key, whose rendered choices differ.
            if id(entry) not in found_for:
                found_for[id(entry)] = tabled_choice(eligible()[0], signature, entry)
            return found_for[id(entry)]

        found = tuning.tabled(choice_of, lambda: list(expanded()[0]))
        if found is None:
            return None
        choice, hit = found
        try:
            call = choice.callable_for(signature)
        except Exception as error:  # e.g. a template that does not render for these sizes
            uncallable = "the tabled pick %s of %s cannot be called (%s); tuning"
            log.warning(uncallable, choice.name, self.name, error)
            return None
        rows = (CandidateResult(choice.digest, choice.description(), hit.entry.result, name=choice.name),)
        record = TuningRecord.of_selection(
            self.name,
            key,
            signature,
            rows,
            choice.digest,
            tuning.seconds,
            True,
            phases=tuning.phases,
            note=hit.note,
            skipped=eligible()[1],
        )
        self.records[key] = self.last_selection = record
        report_tuning(record, table=False)
        self._calls[key] = call
        return call

    def expand(self, signature: Signature) -> list[Choice]:
        """Every choice for `signature` whose requirements its device meets, each once.

        Raises:
            ConfigError: two different choices share a name.
            NoValidChoices: no choice applies to the signature.
        """
        return list(self._expand(signature)[0].values())

    def _expand(self, signature: Signature) -> Expanded:
        """`expand`'s choices by digest, in order, and the spaces left out on the device, with why."""
        by_digest: dict[str, Choice] = {}
        names: set[str] = set()
        spaces, skipped = eligible_spaces(self.spaces, signature.device)
        for space in spaces:
            for choice in space.choices_for(signature):
                if choice.digest in by_digest:
                    continue  # the same implementation listed twice
                if choice.name in names:
                    raise ConfigError(
                        f"selector `{self.name}` has two different choices named {choice.name!r}: give one a name="
                    )
                names.add(choice.name)
                by_digest[choice.digest] = choice
        if not by_digest:
            left_out = "".join(f"; skipped {s.name}: {s.reason}" for s in skipped)
            raise NoValidChoices(
                f"no choice of selector `{self.name}` applies to inputs {signature}: every config space "
                f"was empty for them or skipped on this device{left_out}; add a choice that handles them "
                "(an extern, say)"
            )
        return by_digest, skipped

    def reference_digest(self, signature: Signature) -> str | None:
        """The digest of the reference when it is one of the choices: what runs unless clearly beaten."""
        target = self._reference_target(signature)
        return target.digest if isinstance(target, Choice) else None

    def _reference_target(
        self, signature: Signature | None = None
    ) -> Choice | ChoiceSpace | Callable[..., Any] | None:
        """What outputs are checked against (`reference=`, default: the first extern choice); given
        `signature`, a space's first choice for it.

        Raises:
            ConfigError: the reference is a space with no choice for `signature`.
        """
        wanted = self.reference
        if wanted is None:
            wanted = next((s for s in self.spaces if isinstance(s, ExternChoice)), None)
        elif isinstance(wanted, str):
            wanted = next(s for s in self.spaces if s.name == wanted)  # checked in __init__
        if signature is not None and isinstance(wanted, ChoiceSpace) and not isinstance(wanted, Choice):
            first = next(iter(wanted.choices_for(signature)), None)
            if first is None:
                raise ConfigError(
                    f"reference `{wanted.name}` of selector `{self.name}` has no choice for inputs "
                    f"{signature}, so nothing could check the others' outputs: give a reference that "
                    "takes these inputs (an extern choice, or a function)"
                )
            return first
        return wanted

    def __deepcopy__(self, memo: dict[int, Any]) -> Selector:
        """The selector itself, as for a function: a copied model (`copy.deepcopy`) shares its picks."""
        return self

    def __repr__(self) -> str:
        return f"Selector({self.name!r}, choices=[{', '.join(s.name for s in self.spaces)}])"
