"""An interrupted tuning on a GPU (forked compilers, isolation workers): what was measured stays
stored, nothing it started lives on, and the next tuning measures only the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.test_tuning import _alive, _stored, _wait_for_rows

pytestmark = pytest.mark.gpu

#: 32 configs of a kernel that takes milliseconds a launch (a loop the compiler cannot unroll).
SLOW = """
import json, sys, torch, triton, triton.language as tl, kernelpick

@triton.jit
def slow_kernel(x_ptr, out_ptr, n, rounds, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    for _ in range(rounds):
        x = x * 1.0001 + 0.0001
    tl.store(out_ptr + offsets, x, mask=offsets < n)

configs = [
    kernelpick.Config({"BLOCK": b}, num_warps=w, num_stages=s)
    for b in (128, 256, 512, 1024) for w in (1, 2, 4, 8) for s in (2, 3)
]
kernel = kernelpick.autotune(configs, key=["n"])(slow_kernel)
n = 1 << 20
x = torch.randn(n, device="cuda")
kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, torch.empty_like(x), n, 20000)
print(json.dumps({"measured": sum(not r.from_store for r in kernel.last_tuning.results.values())}))
"""


def _slow(folder: Path) -> subprocess.Popen[str]:
    script = folder / "slow_tuning.py"  # Triton reads a kernel's source from its file
    script.write_text(SLOW)
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(folder / "cache"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    return subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _left(folder: Path) -> list[int]:
    """The processes still running the script: forked compilers, the zygote and its workers."""
    found = subprocess.run(["pgrep", "-f", str(folder / "slow_tuning.py")], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split() if _alive(int(pid))]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_gpu_tuning_keeps_its_results_and_leaves_nothing_running(
    tmp_path: Path, stop: signal.Signals
) -> None:
    process = _slow(tmp_path)
    _wait_for_rows(tmp_path, process, 4)
    process.send_signal(stop)
    _, err = process.communicate(timeout=120)
    assert process.returncode == -stop, err
    deadline = time.monotonic() + 10
    while _left(tmp_path):
        assert time.monotonic() < deadline, f"still running: {_left(tmp_path)}"
        time.sleep(0.1)
    rows, picks = _stored(tmp_path)
    assert 4 <= rows < 32 and picks == 0, err

    again = _slow(tmp_path)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["measured"] == 32 - rows
    assert _stored(tmp_path) == (32, 1)
