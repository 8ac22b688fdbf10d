"""cli/cache.py after a kernel is edited: `cache list` tells its old source's keys from the new ones,
and `cache prune --stale` removes the old source's rows, never those of another kernel of its name."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType

import pytest
import torch
import triton

import kernelpick
from tests.cli.test_cache import lines_with
from tests.cli.test_commands import run_cli
from tests.tune.kernels import grid_1d

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # COMMENT
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)
"""


def load(path: Path, text: str) -> ModuleType:
    """The module of `text`, written to `path` (a new module each time, as a new process would import it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"edited_{time.monotonic_ns()}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tune(module: ModuleType, n: int = 1000) -> None:
    space = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 256})]
    kernel = kernelpick.autotune(space, key=["n"])(module.add_kernel)
    x = torch.randn(n)
    kernel[grid_1d(n)](x, x, torch.empty(n), n)


def listed(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    code, out, _ = run_cli(capsys, "cache", "list", "--json")
    assert code == 0
    return [entry for entry in json.loads(out) if entry["kernel"] == "add_kernel"]


def test_an_edited_kernels_old_source_is_listed_old_and_pruned_as_stale_and_its_namesake_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mine = tmp_path / "mine" / "kernels.py"
    tune(load(mine, KERNEL), 1000)
    tune(load(mine, KERNEL), 2000)  # the same source: one source, two keys
    tune(load(tmp_path / "theirs" / "kernels.py", KERNEL.replace("COMMENT", "their kernel")), 1000)
    tune(load(mine, KERNEL.replace("COMMENT", "an edit of a comment")), 1000)  # a new source

    entries = listed(capsys)
    assert len(entries) == 4 and len({e["source"] for e in entries}) == 3
    old = [e for e in entries if e["superseded"]]
    assert [e["inputs"][0] for e in old] == [1000, 2000]  # the first source's keys, and only those
    code, out, _ = run_cli(capsys, "cache", "list")
    assert code == 0 and len(lines_with(out, "add_kernel", " old ")) == 2  # they looked alike before
    assert "old: a source of the kernel edited since" in out

    code, out, _ = run_cli(capsys, "cache", "prune", "--stale")
    assert code == 0 and "removed 4 rows of 2 keys" in out
    kept = listed(capsys)
    assert sorted(e["source"] for e in kept) == sorted(e["source"] for e in entries if not e["superseded"])
    assert not any(e["superseded"] for e in kept)
