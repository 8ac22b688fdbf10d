"""Selection in worker processes: each choice compiled, checked and timed in a worker, one at a time.

A choice that crashes its worker (a segfault, an abort), hangs, or breaks the worker's CUDA context
gets status `crashed` or `timeout` with the end of the worker's output; the caller never runs it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.select.choice import Choice
from kernelpick.select.inputs import EXAMPLE_SEED
from kernelpick.select.signature import Signature
from kernelpick.workers import pool_for, reference_to
from kernelpick.workers.plan import worker_devices, worker_settings
from kernelpick.workers.problems import describe_value, rebuild_value

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernelpick.select.selector import Selector


def measure_in_workers(
    selector: Selector,
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
            "settings": {**worker_settings(), "confirm_top": 0},
        }
        return pool_for(worker_devices(device)).measure(
            request,
            [c.digest for c in todo],
            timeout_s=current.bench_timeout_s,
            confirm_top=0 if device.interpreter else current.confirm_top,
            confirm_within=current.confirm_within,
            on_done=on_done,
        )


def measure_in_worker(selector: Selector, request: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A worker's side: re-create the inputs, expand the choices, measure the requested ones."""
    problem = request["problem"]
    device = torch.device(request["device"])
    generator = torch.Generator(device=device)
    generator.manual_seed(EXAMPLE_SEED)
    inputs = tuple(rebuild_value(v, device, generator) for v in problem["inputs"])
    kwargs = {name: rebuild_value(v, device, generator) for name, v in problem["kwargs"].items()}
    signature = Signature.of(inputs, kwargs, selector.key)
    choices = selector._expand(signature)
    by_digest = {c.digest: c for c in choices}
    todo = [by_digest[digest] for digest in request["candidates"]]
    overrides = {"confirm_top": len(todo)} if request.get("confirm") else {}
    with settings.override(**overrides):
        results, _ = selector._measure_here(todo, choices, signature, inputs, kwargs)
    return {digest: result.to_dict() for digest, result in results.items()}
