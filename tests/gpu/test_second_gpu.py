"""Tuning on a GPU other than the first: its workers number it cuda:0, the caller cuda:1."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import kernelpick.ops

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU"),
]


def test_a_selection_on_the_second_gpu_measures_its_templates() -> None:
    device = torch.device("cuda", 1)
    a = torch.randn(48, 1024, device=device, dtype=torch.bfloat16)
    b = torch.randn(1024, 2048, device=device, dtype=torch.bfloat16)
    out = kernelpick.ops.mm(a, b)
    assert out.device == device
    torch.testing.assert_close(out, a @ b, rtol=2e-2, atol=2e-2)
    record = kernelpick.ops.selector("mm").last_selection
    assert record is not None
    templates = [row for row in record.candidates if row.name.startswith("triton_mm")]
    assert templates, "the GEMM template's configs are among the choices"
    failed = {row.name: row.result.message for row in templates if not row.result.ok}
    assert not any("device ordinal" in message for message in failed.values()), failed
    assert len(failed) < len(templates), failed


def test_a_process_that_sees_only_the_second_gpu_gets_workers_on_it() -> None:
    # As a `kernelpick tune --devices 1` process or a Ray actor given GPU 1: it sees that GPU as
    # cuda:0, and its workers must measure on it, not on the machine's first GPU.
    script = textwrap.dedent(
        """
        import torch
        from kernelpick.workers import plan
        from kernelpick.workers.pool import pool_for
        from kernelpick.device import describe

        plan.start_workers("cuda", wait=True)
        pool = pool_for(plan.worker_devices(describe(torch.device("cuda"))))
        print(str(torch.cuda.get_device_properties(0).uuid), [w.info.get("uuid") for w in pool.workers])
        """
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1", "KERNELPICK_ISOLATE": "on"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180, check=True
    )
    own, workers = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert workers == repr([own])
