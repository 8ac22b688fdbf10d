"""Triton kernels as PyTorch operators with kernelpick: the written arguments inferred, not declared.

Two operators built on two small Triton kernels:

- `mylib::scaled_add(x, y, alpha) -> Tensor`, out of place: returns x + alpha * y;
- `mylib::clamp_(x, low, high) -> ()`, in place: clamps x, the kernel given a view of x.

kernelpick records one call of each function on fake tensors, analyzes the launched kernels' TTIR,
and registers `clamp_` as writing `x` (its schema says `Tensor(a0!) x`) and `scaled_add` as writing
nothing. Both then work in eager mode, under `torch.compile(fullgraph=True)`, `torch.export` and
fake tensors. `kernelpick.functional` shows the functional form of the in-place kernel.

Runs on a GPU, or on the CPU in Triton's interpreter (no TRITON_INTERPRET needed):

    PYTHONPATH=src python examples/pytorch_op.py
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import FakeTensorMode

import kernelpick

BLOCK = 256


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + alpha * y, mask=mask)


@triton.jit
def clamp_kernel(x_ptr, n, low, high, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(x_ptr + offsets, tl.minimum(tl.maximum(x, low), high), mask=mask)


@kernelpick.op("mylib::scaled_add")
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    scaled_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, alpha, BLOCK=BLOCK)
    return out


@kernelpick.op("mylib::clamp_")
def clamp_(x: torch.Tensor, low: float, high: float) -> None:
    flat = x.view(-1)  # the kernel writes a view of x: x counts as written
    clamp_kernel[(triton.cdiv(flat.numel(), BLOCK),)](flat, flat.numel(), low, high, BLOCK=BLOCK)


def model(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = scaled_add(x, y, 0.5)
    clamp_(h, -1.0, 1.0)
    return h * 2


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(1000, device=device)
    y = torch.randn(1000, device=device)
    expected = ((x + 0.5 * y).clamp(-1, 1)) * 2

    eager = model(x, y)  # the first calls register the operators
    torch.testing.assert_close(eager, expected)
    print(f"device: {device}")
    for op in (scaled_add, clamp_):
        print(f"{op.name}: mutates {op.mutates_args or 'nothing'}; schema {op.schema}")
        for write in op.inference.writes:
            print(f"  because {write.describe()}")

    # Inductor on a GPU; on a CPU, AOTAutograd with eager kernels (Inductor needs a C++ compiler there).
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), expected)
    print(f"torch.compile(fullgraph=True, backend={backend!r}): same result")

    class Model(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return model(a, b)

    exported = torch.export.export(Model(), (x, y))
    torch.testing.assert_close(exported.module()(x, y), expected)
    print(
        "torch.export: same result; its graph calls",
        sorted({str(n.target) for n in exported.graph.nodes if "mylib" in str(n.target)}),
    )

    with FakeTensorMode() as mode:
        fake = model(mode.from_tensor(x), mode.from_tensor(y))
    print(f"fake tensors: shape {tuple(fake.shape)}, stride {fake.stride()}")

    h = x.clone()
    written = kernelpick.functional(clamp_kernel)[(triton.cdiv(1000, BLOCK),)](
        h, 1000, -0.1, 0.1, BLOCK=BLOCK
    )
    assert torch.equal(h, x), "the functional form leaves its arguments alone"
    print(
        f"kernelpick.functional(clamp_kernel) returned {sorted(written)}, max {written['x_ptr'].max().item():.2f}"
    )


if __name__ == "__main__":
    main()
