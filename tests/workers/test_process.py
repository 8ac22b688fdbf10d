"""workers/process.py: what a worker process is started with."""

from __future__ import annotations

import queue
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import kernelpick
from kernelpick.device import describe
from kernelpick.engine.choice import PortableChoice
from kernelpick.engine.signature import Signature
from kernelpick.workers import main, process, values
from kernelpick.workers.pool import WorkerPool
from kernelpick.workers.process import WorkerProcess
from kernelpick.workers.request import Problem


class _Started(Exception):
    """Raised by the stand-in for `subprocess.Popen` once it has the environment."""


def started_environment(
    monkeypatch: pytest.MonkeyPatch, device: int | None, worker: WorkerProcess | None = None
) -> dict[str, str]:
    seen: dict[str, str] = {}

    def popen(*args: Any, env: dict[str, str], **kwargs: Any) -> None:
        seen.update(env)
        raise _Started

    monkeypatch.setattr(process, "fork_zygote", lambda **_: None)  # a new interpreter, not a forked worker
    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(_Started):
        (worker or WorkerProcess(device, queue.Queue(), 0)).start()
    return seen


def test_a_worker_of_a_process_that_sees_one_gpu_measures_on_that_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A process of `kernelpick tune --devices 1` (or a Ray actor given GPU 1) sees it as cuda:0: its
    # worker must be told GPU 1, not the machine's GPU 0, where another process measures.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert started_environment(monkeypatch, 0)["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    assert started_environment(monkeypatch, 2)["CUDA_VISIBLE_DEVICES"] == "6"


def test_a_worker_of_a_process_that_sees_every_gpu_is_told_its_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert started_environment(monkeypatch, 3)["CUDA_VISIBLE_DEVICES"] == "3"


def test_a_cpu_worker_keeps_the_environments_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert started_environment(monkeypatch, None)["CUDA_VISIBLE_DEVICES"] == "2"


def test_a_pools_worker_isolates_nothing_itself_a_device_process_as_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker measures what it is sent itself; a device process of `kernelpick tune --devices`,
    # a WorkerProcess too, isolates as the command's settings say.
    monkeypatch.setenv("KERNELPICK_ISOLATE", "on")
    assert (
        started_environment(monkeypatch, None, WorkerPool([None]).workers[0])["KERNELPICK_ISOLATE"] == "off"
    )
    device_process = WorkerProcess(None, queue.Queue(), 0, serve="kernelpick.jobs.device_process:serve")
    assert started_environment(monkeypatch, None, device_process)["KERNELPICK_ISOLATE"] == "on"


def sleep_then_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    time.sleep(600)  # far past its limit: only an end of the worker stops it
    return a + b


@pytest.mark.slow
def test_a_worker_ends_itself_past_its_requests_time_limit_whatever_its_caller_waits(
    tmp_path: Path,
) -> None:
    a, b = torch.randn(64), torch.randn(64)
    signature = Signature.of((a, b), {})
    candidate = kernelpick.extern(sleep_then_add)
    problem = Problem.describe(describe(a.device), (a, b), {}, tmp_path)
    request = {
        "problem": problem.to_data(),
        "candidates": {candidate.digest: values.encode(PortableChoice(candidate, signature))},
        "step": "screen",
        "id": 1,
        "timeout_s": 1.0,  # the bench timeout this request is measured under
    }
    pool = WorkerPool([None])
    try:
        pool.start()
        worker = pool.workers[0]
        started = time.monotonic()
        worker.send(request)
        # This caller waits far longer than the limit (as one that hangs, or never looks again).
        slot, _, body = pool._messages.get(timeout=120)
        took = time.monotonic() - started
        assert body is None  # the worker's end, not an answer
        assert worker.exit_code() == -signal.SIGALRM
        assert 1.0 + main.OVERRUN_S <= took < 1.0 + main.OVERRUN_S + 20  # load adds seconds, not minutes
        result = pool._result(slot, candidate.digest, None, first=False)
        assert result.status == "timeout" and "ended itself" in result.message
    finally:
        pool.close()
