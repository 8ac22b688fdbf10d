"""A model run once to record every key it meets, then tuned ahead: `KERNELPICK_RECORD`.

The model is a small MLP block: a linear layer through `kernelpick.ops.mm` and an autotuned Triton
activation kernel, run at a few batch sizes as a server would meet them. Run it with the setting,
tune what it recorded, and the next run (here, with tuning forbidden) finds every key stored:

    KERNELPICK_RECORD=keys.jsonl python examples/record_keys.py
    kernelpick tune keys.jsonl          # --devices 0,1,2,3 on a host of GPUs
    KERNELPICK_NO_TUNING=1 python examples/record_keys.py

On a CPU the Triton kernels run in Triton's interpreter: slow, with timings that say nothing about a
GPU, but recorded and tuned the same way. docs/store.md says what a recording holds.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick import ops


@kernelpick.autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


def forward(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`relu(x @ weight.T)`: one GEMM key and one kernel key per batch size."""
    y = ops.mm(x, weight.t())
    out = torch.empty_like(y)
    n = y.numel()
    relu[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](y, out, n)
    return out


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    weight = torch.randn(64, 32, device=device, dtype=dtype)
    for batch in (8, 32):
        x = torch.randn(batch, 32, device=device, dtype=dtype)
        torch.testing.assert_close(forward(x, weight), torch.relu(x @ weight.t()), rtol=2e-2, atol=2e-2)
        tuning = relu.last_tuning
        assert tuning is not None
        print(f"batch {batch}: relu ran {tuning.best}, {'stored' if tuning.from_store else 'tuned now'}")


if __name__ == "__main__":
    main()
