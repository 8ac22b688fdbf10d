"""With TRITON_INTERPRET=1 set, the usual way to run Triton on a CPU, every public feature works.

Under that variable `@triton.jit` makes interpreted functions, which Triton cannot compile: kernelpick
analyzes, keys and tunes them through their compilable twins (`kernelpick.compile.twins`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def run_interpreted(script: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "KERNELPICK_CACHE_DIR": str(tmp_path / "cache")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )


def test_every_public_feature_works_under_triton_interpret(tmp_path: Path) -> None:
    done = run_interpreted(ROOT / "tests" / "interpret_features.py", tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    features = json.loads(done.stdout.strip().splitlines()[-1])
    assert features == ["analyze", "autotune", "isolation", "select", "op", "launch", "report"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_the_examples_run_under_triton_interpret(example: Path, tmp_path: Path) -> None:
    done = run_interpreted(example, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compile_error" not in done.stdout, done.stdout[-3000:]


ON_OLDER_DYNAMO = """
import torch, triton, triton.language as tl
import kernelpick
import kernelpick.pytorch.traced

kernelpick.pytorch.traced.DYNAMO_TAKES_KERNELS = False  # as torch 2.11's Dynamo: kernels launched natively


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)


x, out = torch.randn(100), torch.zeros(100)
compiled = torch.compile(
    lambda t, o: kernelpick.launch(double_kernel, (2,), t, o, 100, BLOCK=64), backend="aot_eager"
)
compiled(x, out)
torch.testing.assert_close(out, 2 * x)
"""


def test_interpreted_kernels_launch_under_a_dynamo_that_launches_natively(tmp_path: Path) -> None:
    # Torch 2.11's Dynamo launches a kernel through its own Triton support, which traced an interpreted
    # kernel into Triton's interpreter and failed there (uint64 fake tensors): the launch is a graph break.
    script = tmp_path / "older_dynamo.py"
    script.write_text(ON_OLDER_DYNAMO)
    done = run_interpreted(script, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
