"""A selection met first inside `torch.cuda.graph(...)`: measured in the workers, recorded, replayed right."""

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
    import json
    import torch
    import kernelpick
    from kernelpick import ops

    found = {}
    selector = kernelpick.Selector("add", [kernelpick.extern(torch.add), kernelpick.extern(lambda a, b: a + b)])
    a = torch.randn(40, 1000, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1000, 520, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4096, device="cuda")
    # As PyTorch asks of any program before a capture: cuBLAS's handle and workspace are made by a
    # first product outside it (a fresh process's first cuBLAS call inside a capture fails, torch.mm's too).
    torch.mm(a[:1, :8], w[:8, :8])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # both met for the first time here
        product = ops.mm(a, w)
        total = selector(x, x)
    a.copy_(torch.randn_like(a))
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    expected = a.float() @ w.float()
    found["mm_error"] = float((product.float() - expected).abs().max() / expected.abs().max())
    found["add_right"] = bool(torch.equal(total, x + x))
    found["statuses"] = sorted(r.status for r in selector.last_selection.results.values())
    found["mm_pick"] = ops.selector("mm").last_selection.best
    print(json.dumps(found))
    """
)


def test_first_calls_inside_a_capture_select_in_workers_and_the_graph_replays_the_picks(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["add_right"] and found["statuses"] == ["ok", "ok"], found
    assert found["mm_error"] < 2e-2, found  # bf16 against float32, relative to the largest output
    print(found)
