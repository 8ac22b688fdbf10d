"""Exported and trained programs with kernelpick operators: an exported program saves, loads in a new
process that imports the module defining its operators, and runs; a compiled model with trainable
weights gets the operator's backward, or one line saying it has none."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import kernelpick
from kernelpick.errors import OperatorError
from tests.pytorch.kernels import blocks, scale_kernel

#: A module a user writes: an operator declaring what it writes, an inferred one, and kernelpick.ops.
MODULE = """
import torch
import triton

import kernelpick
from kernelpick import ops
from tests.pytorch.kernels import add_kernel, blocks


@kernelpick.op("kp_test_export::add", mutates_args=())
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[blocks(x.numel())](x, y, out, x.numel(), BLOCK=16)
    return out


@kernelpick.op("kp_test_export::add_inferred")
def add_inferred(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[blocks(x.numel())](x, y, out, x.numel(), BLOCK=16)
    return out


class Model(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op
        self.register_buffer("weight", torch.eye(8) * 2)

    def forward(self, x, y):
        return ops.mm(self.op(x, y), self.weight)
"""

EXPORT = """
import sys
import torch
from user_module import Model, add, add_inferred

model = Model(add if sys.argv[2] == "declared" else add_inferred)
program = torch.export.export(model, (torch.ones(4, 8), torch.ones(4, 8)))
assert "set_grad_enabled" not in str(program.graph), program.graph  # nothing but the program's nodes
torch.export.save(program, sys.argv[1])
"""

LOAD = """
import sys
import torch
import user_module  # registers what it defines, as a deployment's import would

program = torch.export.load(sys.argv[1])
x, y = torch.randn(4, 8), torch.randn(4, 8)
torch.testing.assert_close(program.module()(x, y), (x + y) * 2)
print("ran")
"""


def _run(tmp_path: Path, script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    root = Path(__file__).resolve().parents[2]
    environment = {"PYTHONPATH": f"{tmp_path}:{root}:{root / 'src'}", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, str(tmp_path / "script.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=240,
        env={**environment, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)},
    )


@pytest.mark.slow
def test_an_exported_program_loads_and_runs_in_a_new_process_that_imports_its_operators(
    tmp_path: Path,
) -> None:
    (tmp_path / "user_module.py").write_text(MODULE)
    saved = str(tmp_path / "program.pt2")
    exported = _run(tmp_path, EXPORT, saved, "declared")
    assert exported.returncode == 0, exported.stderr
    loaded = _run(tmp_path, LOAD, saved)
    assert loaded.returncode == 0 and "ran" in loaded.stdout, loaded.stderr


@pytest.mark.slow
def test_an_inferred_operator_exports_cleanly_and_its_load_says_what_registers_it(tmp_path: Path) -> None:
    # Its mutations are found by one call: a new process that has not called it cannot know them.
    (tmp_path / "user_module.py").write_text(MODULE)
    saved = str(tmp_path / "program.pt2")
    exported = _run(tmp_path, EXPORT, saved, "inferred")
    assert exported.returncode == 0, exported.stderr
    loaded = _run(tmp_path, LOAD, saved)
    assert loaded.returncode != 0
    assert "op `kp_test_export::add_inferred` is not registered yet" in loaded.stderr
    assert "mutates_args=" in loaded.stderr


@kernelpick.op("kp_test_export::scale")
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    out = torch.empty_like(x)
    scale_kernel[blocks(x.numel())](x, out, x.numel(), factor, BLOCK=16)
    return out


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1, 1, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale(x * self.weight, 3.0)


def test_an_operator_without_a_backward_says_so_in_one_line() -> None:
    model = Scaled()
    with torch.no_grad():  # where no gradient flows, it needs none
        torch.testing.assert_close(model(torch.ones(32)), model.weight * 3)
    with pytest.raises(
        OperatorError, match=r"has no backward formula: give it one with @scale.register_autograd"
    ) as error:
        model(torch.ones(32)).sum().backward()
    assert "\n" not in str(error.value)


def test_a_compiled_model_trains_through_an_operator_with_the_users_backward() -> None:
    @kernelpick.op("kp_test_export::scale_trained")
    def scale_trained(x: torch.Tensor, factor: float) -> torch.Tensor:
        out = torch.empty_like(x)
        scale_kernel[blocks(x.numel())](x, out, x.numel(), factor, BLOCK=16)
        return out

    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.factor = inputs[1]

    scale_trained.register_autograd(lambda ctx, grad: (grad * ctx.factor, None), setup_context=setup_context)

    class Model(Scaled):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return scale_trained(x * self.weight, 3.0)

    model, x = Model(), torch.randn(32)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    compiled(x).square().sum().backward()
    assert model.weight.grad is not None
    torch.testing.assert_close(model.weight.grad, 2 * (x * model.weight.detach() * 3) * 3 * x)
