"""workers/process.py: what a worker process is started with."""

from __future__ import annotations

import queue
import subprocess
from typing import Any

import pytest

from kernelpick.workers import process
from kernelpick.workers.process import WorkerProcess


class _Started(Exception):
    """Raised by the stand-in for `subprocess.Popen` once it has the environment."""


def started_environment(monkeypatch: pytest.MonkeyPatch, device: int | None) -> dict[str, str]:
    seen: dict[str, str] = {}

    def popen(*args: Any, env: dict[str, str], **kwargs: Any) -> None:
        seen.update(env)
        raise _Started

    monkeypatch.setattr(process, "fork_zygote", lambda: None)  # a new interpreter, not a forked worker
    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(_Started):
        WorkerProcess(device, queue.Queue(), 0).start()
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
