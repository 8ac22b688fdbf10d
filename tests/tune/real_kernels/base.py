# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""What every real-world case is: a kernel built under a given autotune decorator, its inputs, its check."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import triton

#: `triton.autotune`, `kernelpick.autotune`, or either with some arguments bound (a CPU's `do_bench`).
Autotune = Callable[..., Callable[[Any], Any]]
#: A case's problem size by name: {"M": 4096, "N": 4096, "K": 4096}, {"Z": 4, "H": 32, ...}.
Size = Mapping[str, int]
#: The inputs a case's operation takes, made by `Case.make_inputs`.
Inputs = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class TutorialCall:
    """How to run a case through Triton's own tutorial file instead of our kernels.

    Attributes:
        file: the tutorial's file name in Triton's `python/tutorials` (03-matrix-multiplication.py, ...).
        call: runs the tutorial module's host function on the case's inputs; returns what `Case.check` takes.
        stop_before: the source text of the first top-level statement not to run on import (a tutorial
            that tests and benchmarks itself at import time, outside `if __name__ == "__main__"`).
    """

    file: str
    call: Callable[[Any, Inputs], Any]
    stop_before: str | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One real-world kernel, as its authors call it, behind one `autotune` decorator.

    Attributes:
        name: what results and test ids call it (`09-matmul_tma_persistent-fp16`).
        summary: what the case exercises, in a line.
        build: `build(autotune, configs)` decorates fresh kernels with `autotune` over `configs` and
            returns the operation (the host wrapper): `operation(*inputs)` gives what `check` takes.
        make_inputs: `make_inputs(size, device)`, seeded, the inputs at `size`.
        check: `check(inputs, outputs)` raises AssertionError unless the outputs pass the check of the
            kernel's own source (the tutorial's test, flash-attn's, fla's) against a torch reference.
        configs: the source's full config list (what the GPU benchmark tunes over).
        tiny_configs: small configs the interpreter runs in moments, two per kernel (what the tests use).
        tiny_size: a size the interpreter runs in moments.
        sizes: the GPU benchmark's sizes.
        unsupported: `unsupported(device)`: why the case cannot run on `device` ("cpu", "cuda"), or None.
        tutorial: how to run Triton's own tutorial file for this case, where there is one.
    """

    name: str
    summary: str
    build: Callable[[Autotune, list[triton.Config]], Callable[..., Any]]
    make_inputs: Callable[[Size, str], Inputs]
    check: Callable[[Inputs, Any], None]
    configs: Callable[[], list[triton.Config]]
    tiny_configs: Callable[[], list[triton.Config]]
    tiny_size: Size
    sizes: tuple[Size, ...]
    unsupported: Callable[[str], str | None] = field(default=lambda device: None)  # runs anywhere
    tutorial: TutorialCall | None = None


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> Any:
    """Launch a kernel that is not tuned (a tutorial's fixed-config backward pass, say) as its source does,
    `kernel[grid](*args, **kwargs)`; on CPU tensors in Triton's interpreter, as a GPU would run it."""
    if _on_cpu(args, kwargs):
        from kernelpick.compile.launch import interpret

        return interpret(kernel, *args, grid=grid, **kwargs)
    return kernel[grid](*args, **kwargs)


def _on_cpu(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    for value in (*args, *kwargs.values()):
        base = getattr(value, "base", value)  # a TensorDescriptor's tensor
        if isinstance(base, torch.Tensor):
            return base.device.type == "cpu"
    return False


def capability(device: str) -> tuple[int, int] | None:
    """The CUDA compute capability of `device`, None for the CPU (Triton's interpreter)."""
    return torch.cuda.get_device_capability() if device.startswith("cuda") else None


def processor_count(device: str, on_cpu: int = 3) -> int:
    """NUM_SMS as the persistent kernels take it; on the CPU a few, so that each program takes several tiles."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(device).multi_processor_count
    return on_cpu


def generator(device: str, seed: int = 0) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def relative_rmse(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """fla's error ratio: the root mean square of the difference over that of the reference."""
    difference = (actual.float() - expected.float()).square().mean().sqrt()
    return float(difference / expected.float().square().mean().sqrt().clamp_min(1e-12))
