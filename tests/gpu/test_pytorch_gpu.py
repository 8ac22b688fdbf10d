"""Operators, launch and functional on a real GPU: eager fast path, torch.compile with Inductor, torch.export."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import triton

import kernelpick
from kernelpick.pytorch.fast_path import DIRECT, route
from kernelpick.pytorch.traced import DYNAMO_TAKES_KERNELS
from tests.pytorch.kernels import BLOCK, add, add_and_increment_, increment_, increment_kernel, increment_row_

pytestmark = pytest.mark.gpu

tuned_increment = kernelpick.autotune(
    [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 1024})], key=["n"]
)(increment_kernel)
# One config: with several, triton.autotune benchmarks this in-place kernel on the real tensor and
# corrupts it (what kernelpick.autotune exists to prevent), in eager mode and under Inductor alike.
their_increment = triton.autotune([triton.Config({"BLOCK": 256})], key=["n"])(increment_kernel)
functional_increment = kernelpick.functional(increment_kernel)  # made outside: traceable on any torch


def model(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = add(x, y)
    increment_(z)
    w = add_and_increment_(z, y)
    increment_row_(x.view(8, -1), 3)
    n = w.numel()
    kernelpick.launch(their_increment, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), w, n)
    kernelpick.launch(increment_kernel, (triton.cdiv(n, BLOCK),), w, n, BLOCK=BLOCK)
    out = functional_increment[(triton.cdiv(n, BLOCK),)](w, n, BLOCK=BLOCK)["x_ptr"]
    return out * 2 + z


def model_with_kernelpick_kernels(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    kernelpick.launch(tuned_increment, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), x, n)
    written = kernelpick.functional(increment_kernel)[(triton.cdiv(n, BLOCK),)](y, n, BLOCK=BLOCK)
    return written["x_ptr"] + x


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(0)
    return (
        torch.randn(4096, device="cuda", generator=generator),
        torch.randn(4096, device="cuda", generator=generator),
    )


def run(fn):  # type: ignore[no-untyped-def]
    x, y = inputs()
    return fn(x, y), x, y


def test_eager_runs_on_the_gpu_without_the_dispatcher(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = inputs()
    assert route((x, y), {}, True) == DIRECT
    torch.testing.assert_close(add(x, y), x + y)
    monkeypatch.setattr(add, "_overload", lambda *a, **k: pytest.fail("went through the dispatcher"))
    torch.testing.assert_close(add(x, y), x + y)
    version = x._version
    increment_(x)
    assert x._version > version


NEEDS_DYNAMO_TAKING_KERNELS = pytest.mark.skipif(
    not DYNAMO_TAKES_KERNELS, reason="this torch's Dynamo cannot pass kernel objects to kernelpick"
)


@pytest.mark.parametrize(
    ("backend", "fn"),
    [
        ("inductor", model),
        ("aot_eager", model),
        pytest.param("inductor", model_with_kernelpick_kernels, marks=NEEDS_DYNAMO_TAKING_KERNELS),
    ],
    ids=["inductor", "aot_eager", "kernelpick kernels inside compile"],
)
def test_compiled_and_exported_equal_eager_on_the_gpu(backend: str, fn) -> None:  # type: ignore[no-untyped-def]
    expected = run(fn)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    for actual, wanted in zip(run(torch.compile(fn, backend=counter, fullgraph=True)), expected, strict=True):
        torch.testing.assert_close(actual, wanted)
    assert counter.frame_count == 1

    class Wrapper(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return fn(x, y)

    exported = torch.export.export(Wrapper(), inputs()).module()
    for actual, wanted in zip(run(exported), expected, strict=True):
        torch.testing.assert_close(actual, wanted)
