"""The worker's side of a request, run here: what it keeps between the requests of one problem."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

import kernelpick
from kernelpick.device import describe
from kernelpick.engine.choice import PortableChoice
from kernelpick.engine.signature import Signature
from kernelpick.workers import values
from kernelpick.workers.request import Problem, answer


def test_the_reference_runs_once_per_problem_not_once_per_candidate(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.touch()

    def counted_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # By value in a worker: a counter in memory would count in the worker's copy; a file is shared.
        with calls.open("a") as stream:
            stream.write("x")
        return a + b

    a, b = torch.randn(64), torch.randn(64)
    signature = Signature.of((a, b), {})
    reference = kernelpick.extern(counted_add)
    candidate = kernelpick.extern(torch.add, name="torch.add")
    problem = Problem.describe(
        describe(a.device),
        (a, b),
        {},
        tmp_path,
        reference=values.encode(PortableChoice(reference, signature)),
        reference_name="counted_add",
    )
    payloads = {candidate.digest: values.encode(PortableChoice(candidate, signature))}
    for _ in range(3):  # consecutive requests of one problem, as the pool sends them
        request = {"problem": problem.to_data(), "candidates": payloads, "step": "screen"}
        assert answer(request)[candidate.digest]["status"] == "ok"
    assert calls.read_text() == "x"  # the expected output is made once and checked against thrice


def test_a_candidate_written_in_place_is_checked_against_the_reference_of_the_first_values(
    tmp_path: Path,
) -> None:
    def add_in_place(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.add_(y)

    a, b = torch.randn(64), torch.randn(64)
    signature = Signature.of((a, b), {})
    reference, candidate = kernelpick.extern(torch.add), kernelpick.extern(add_in_place)
    problem = Problem.describe(
        describe(a.device),
        (a, b),
        {},
        tmp_path,
        reference=values.encode(PortableChoice(reference, signature)),
        reference_name=reference.name,
    )
    request = {
        "problem": problem.to_data(),
        "candidates": {candidate.digest: values.encode(PortableChoice(candidate, signature))},
        "step": "screen",
    }
    assert answer(request)[candidate.digest]["status"] == "ok"


def test_a_template_runs_on_the_workers_device_whatever_the_callers_device_is_numbered(
    tmp_path: Path,
) -> None:
    # Rank 1 of a job renders its templates for cuda:1; its worker sees that GPU alone, as cuda:0.
    # Here the caller's device is a GPU the worker lacks (cuda:5) and the worker's the CPU.
    import dataclasses

    from kernelpick.device import DeviceInfo
    from kernelpick.ops import selector
    from kernelpick.select.template_choice import TemplateChoice

    a, b = torch.randn(16, 32), torch.randn(32, 16)
    elsewhere = torch.device("cuda", 5)
    local = Signature.of((a, b), {})
    caller = Signature(
        tuple(dataclasses.replace(spec, device=elsewhere) for spec in local.inputs),
        local.kwargs,
        local.user_key,
        DeviceInfo("cuda", 5, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132),
    )
    template = next(c for c in selector("mm").expand(caller) if isinstance(c, TemplateChoice))
    assert template.rendered.output.device == elsewhere  # rendered for the caller's GPU
    portable = PortableChoice(template, caller)
    assert portable.on(describe(a.device)).signature.device == describe(a.device)
    problem = Problem.describe(describe(a.device), (a, b), {}, tmp_path)
    request = {"problem": problem.to_data(), "candidates": {template.digest: values.encode(portable)}}
    result = answer({**request, "step": "screen"})[template.digest]
    assert result["status"] == "ok", result["message"]


def test_a_request_says_where_its_seconds_went(tmp_path: Path) -> None:
    a, b = torch.randn(64), torch.randn(64)
    signature = Signature.of((a, b), {})
    candidate = kernelpick.extern(torch.add, name="torch.add")
    problem = Problem.describe(describe(a.device), (a, b), {}, tmp_path)
    payloads = {candidate.digest: values.encode(PortableChoice(candidate, signature))}
    request = {"problem": problem.to_data(), "candidates": payloads, "step": "screen"}
    spent: dict[str, float] = {}
    started = time.perf_counter()
    assert answer(request, spent)[candidate.digest]["status"] == "ok"
    elapsed = time.perf_counter() - started
    assert set(spent) == {"problem", "load", "measure"}
    assert all(seconds > 0 for seconds in spent.values())
    assert sum(spent.values()) <= elapsed  # parts of the request, not overlapping
    prepared: dict[str, float] = {}
    answer({**request, "step": "prepare"}, prepared)
    assert set(prepared) == {"problem", "load"}  # nothing is measured in the prepare step


def test_a_worker_has_an_allocator_where_the_program_set_one(tmp_path: Path) -> None:
    # Kernels that make tensor descriptors on the device call Triton's allocator at launch. A worker
    # gets one of its own (torch's memory) where the caller set one, never the caller's function: the
    # tutorial-style closure over the call's input tensor once crossed with that tensor in every
    # request (47 s for a 4096-square fp16 matmul's 48 configs on an H200).
    import triton
    from triton.runtime import _allocation

    from kernelpick.workers.request import _WorkerProblem

    a = torch.randn(1024)
    triton.set_allocator(_allocation.NullAllocator())  # whatever an earlier test of this process set

    def closure_allocator(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        return torch.empty(size, device=a.device, dtype=torch.int8)

    without = Problem.describe(describe(a.device), (a,), {}, tmp_path)
    triton.set_allocator(closure_allocator)
    try:
        problem = Problem.describe(describe(a.device), (a,), {}, tmp_path)
    finally:
        triton.set_allocator(_allocation.NullAllocator())
    assert without.allocator is False and problem.allocator is True
    assert len(json.dumps(problem.to_data())) < 2_000  # a flag, not the closure and its tensor
    _WorkerProblem(Problem.from_data(problem.to_data()))  # what a worker does with a request
    try:
        scratch = _allocation._allocator.get()(300, 128, None)
        assert scratch.numel() == 300 and scratch.data_ptr() % 128 == 0
        _WorkerProblem(without)  # the next problem's program set none
        assert isinstance(_allocation._allocator.get(), _allocation.NullAllocator)
    finally:
        triton.set_allocator(_allocation.NullAllocator())


def test_a_selections_integer_inputs_are_new_in_the_worker_unless_its_input_gen_is_given_them(
    tmp_path: Path,
) -> None:
    from kernelpick.engine.choice_measuring import ChoiceMeasuring

    x, indices = torch.randn(8), torch.arange(8).flip(0)
    signature = Signature.of((x, indices), {})

    def same_indices(x: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn_like(x), indices.clone()

    def gather(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        if not torch.equal(indices, torch.arange(8).flip(0)):
            raise ValueError("not the caller's indices")
        return x[indices]

    candidate = kernelpick.extern(gather)
    payloads = {candidate.digest: values.encode(PortableChoice(candidate, signature))}
    statuses = []
    for input_gen in (None, same_indices):
        measuring = ChoiceMeasuring("gather", signature, (x, indices), {}, input_gen=input_gen)
        problem = measuring._problem(tmp_path, {})
        request = {"problem": problem.to_data(), "candidates": payloads, "step": "screen"}
        statuses.append(answer(request)[candidate.digest]["status"])
    assert statuses == ["runtime_error", "ok"]


def test_a_problem_that_differs_only_in_a_scalars_type_is_made_again(tmp_path: Path) -> None:
    # 2 and 2.0 (or 1 and True) are equal in Python but different arguments (Triton compiles a kernel
    # for each): a worker that kept the first problem would run the second's candidates on its values.
    x = torch.randn(64)

    def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
        if not isinstance(factor, float):
            raise TypeError(f"factor {factor!r} is not the caller's float")
        return x * factor

    candidate = kernelpick.extern(scaled)
    statuses = []
    for factor in (2, 2.0):
        signature = Signature.of((x, factor), {})
        problem = Problem.describe(describe(x.device), (x, factor), {}, tmp_path)
        payloads = {candidate.digest: values.encode(PortableChoice(candidate, signature))}
        request = {"problem": problem.to_data(), "candidates": payloads, "step": "screen"}
        statuses.append(answer(request)[candidate.digest]["status"])
    assert statuses == ["runtime_error", "ok"]
