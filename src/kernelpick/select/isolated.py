"""Selection in worker processes: the choices compiled by the workers together, then each checked
and timed in a worker, one at a time.

A choice that crashes its worker (a segfault, an abort), hangs, or breaks the worker's CUDA context
gets status `crashed` or `timeout` with the end of the worker's output; the caller never runs it.
Compiling (rendering templates, Triton's compiler) runs first, on many threads of every worker: it
launches nothing, and a worker that dies compiling only makes the choices compile again one by one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from kernelpick import settings
from kernelpick.bench.benchmarker import budgets_for
from kernelpick.bench.result import BenchmarkResult
from kernelpick.select.choice import Choice, ExternChoice
from kernelpick.select.inputs import EXAMPLE_SEED, ExampleInputs
from kernelpick.select.signature import Signature
from kernelpick.select.verify import Checking, tf32_allowed
from kernelpick.workers import pool_for, reference_to
from kernelpick.workers.plan import step_budgets, worker_devices, worker_settings
from kernelpick.workers.problems import describe_value, rebuild_value, reused

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernelpick.compile.precompile import CompileOutcome
    from kernelpick.select.inputs import InputGen


class IsolatedSelector(Protocol):
    """What selecting in workers takes of a selector (`kernelpick.Selector` is one): its identity,
    how to expand, compile and measure its choices, and which one is the reference."""

    name: str
    key: Callable[..., Any] | None
    input_gen: InputGen | None
    defined_in: str | None

    def expand(self, signature: Signature) -> list[Choice]: ...

    def precompile_choices(
        self, todo: list[Choice], example: ExampleInputs, signature: Signature
    ) -> list[CompileOutcome]: ...

    def checking_for(
        self, choices: list[Choice], signature: Signature, example: ExampleInputs
    ) -> Checking: ...

    def measure_here(
        self,
        todo: list[Choice],
        choices: list[Choice],
        signature: Signature,
        checking: Checking,
        budgets: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, BenchmarkResult], str | None]: ...

    def reference_digest(self, signature: Signature) -> str | None: ...


def measure_in_workers(
    selector: IsolatedSelector,
    todo: list[Choice],
    signature: Signature,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    on_done: Callable[[], object] | None = None,
) -> dict[str, BenchmarkResult]:
    """Measure `todo` in workers, by digest.

    Raises:
        IsolationError: the selector or its inputs cannot go to a worker (then measure in-process).
    """
    if selector.input_gen is not None:
        reference_to(selector.input_gen)  # a worker must be able to import it too
    reference = reference_to(selector, selector.defined_in)
    current = settings.current()
    device = signature.device
    with tempfile.TemporaryDirectory(prefix="kernelpick-") as payload:
        problem = {
            "inputs": [describe_value(v, Path(payload)) for v in inputs],
            "kwargs": {name: describe_value(v, Path(payload)) for name, v in kwargs.items()},
        }
        request = {
            "target": reference.to_data(),
            "device": device.type,
            "problem": problem,
            "settings": worker_settings(),
            # torch's TF32 switch decides what the reference computes and how closely a float32
            # output must match it: the worker must see the caller's.
            "allow_tf32": tf32_allowed(),
        }
        compiled = [c for c in todo if not isinstance(c, ExternChoice)]
        return pool_for(worker_devices(device)).measure(
            request,
            [c.digest for c in todo],
            timeout_s=current.bench_timeout_s,
            prepare_timeout_s=current.compile_timeout_s if compiled else None,
            confirm_top=0 if device.interpreter else current.confirm_top,
            confirm_within=current.confirm_within,
            on_done=on_done,
            reference=selector.reference_digest(signature),
        )


@dataclass(slots=True)
class _Problem:
    """A selection problem re-created in a worker: inputs, signature, choices, the example inputs
    that compiling and measuring share; the reference's output once a candidate was measured;
    warmed up yet or not."""

    signature: Signature
    choices: list[Choice]
    by_digest: dict[str, Choice]
    example: ExampleInputs
    checking: Checking | None = None
    warmed: bool = False


def measure_in_worker(selector: IsolatedSelector, request: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A worker's side: re-create the inputs and expand the choices (once for consecutive requests of
    one problem); then compile the requested choices (the prepare step, answering with failures
    only) or measure them."""
    device = torch.device(request["device"])

    def rebuild() -> _Problem:
        problem = request["problem"]
        generator = torch.Generator(device=device)
        generator.manual_seed(EXAMPLE_SEED)
        inputs = tuple(rebuild_value(v, device, generator) for v in problem["inputs"])
        kwargs = {name: rebuild_value(v, device, generator) for name, v in problem["kwargs"].items()}
        signature = Signature.of(inputs, kwargs, selector.key)
        choices = selector.expand(signature)
        example = ExampleInputs(inputs, kwargs, selector.input_gen)
        return _Problem(signature, choices, {c.digest: c for c in choices}, example)

    if "allow_tf32" in request:  # a worker serves one caller: its switch stays set as the caller's
        torch.backends.cuda.matmul.allow_tf32 = bool(request["allow_tf32"])
    # The TF32 switch is part of the problem: it sets what the reference computes.
    state = reused([selector.name, request["device"], request["problem"], request.get("allow_tf32")], rebuild)
    todo = [state.by_digest[digest] for digest in request["candidates"]]
    if request.get("step") == "prepare":
        outcomes = selector.precompile_choices(todo, state.example, state.signature)
        failed = {
            c.digest: BenchmarkResult.failed(o.status, o.message) for c, o in zip(todo, outcomes) if not o.ok
        }
        return {digest: result.to_dict() for digest, result in failed.items()}
    budgets = step_budgets(request, budgets_for(state.signature.device, per_call=True))
    # The GPU warms up once per problem: later requests follow one another closely.
    warm_up = {} if not state.warmed else {"select_warmup_ms": 0.0}
    if state.checking is None:
        state.checking = selector.checking_for(state.choices, state.signature, state.example)
    with settings.override(**warm_up):
        results, _ = selector.measure_here(todo, state.choices, state.signature, state.checking, budgets)
    state.warmed = True
    return {digest: result.to_dict() for digest, result in results.items()}
