"""GPU workers after the caller used CUDA: forked by a spawned zygote, ended when idle, started again fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]

PROGRAM = textwrap.dedent(
    """
    import json, time
    import torch
    import kernelpick
    from kernelpick.workers import pool_for, zygote

    torch.cuda.get_device_capability()  # CUDA initialized before any tuned kernel: no fork of us
    selector = kernelpick.Selector("add", [kernelpick.extern(torch.add), kernelpick.extern(lambda a, b: a + b)])
    pool = pool_for([0])
    found = {}
    for n in (256, 512):
        x = torch.randn(n, device="cuda")
        started = time.perf_counter()
        torch.testing.assert_close(selector(x, x), x + x)
        found[f"tuning_{n}_s"] = time.perf_counter() - started
        found[f"statuses_{n}"] = [r.status for r in selector.last_selection.results.values()]
        deadline = time.monotonic() + 30
        while any(w.alive for w in pool.workers) and time.monotonic() < deadline:
            time.sleep(0.02)
        found[f"alive_after_{n}"] = any(w.alive for w in pool.workers)
    z = zygote.zygote()
    found["spawned_zygote"] = z is not None and z.spawned
    found["forked"] = pool.workers[0].forked
    print(json.dumps(found))
    """
)


def test_after_cuda_use_workers_come_from_a_spawned_zygote_end_when_idle_and_restart(tmp_path: Path) -> None:
    # One GPU: the pool the program looks at is the one its selector measures with, on a host of several too.
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"), "KERNELPICK_DEVICES": "0"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["spawned_zygote"] and found["forked"], found
    assert found["statuses_256"] == ["ok", "ok"] and found["statuses_512"] == ["ok", "ok"], found
    assert not found["alive_after_256"] and not found["alive_after_512"], found
    print(found)
