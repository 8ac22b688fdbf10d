"""Which arguments does a Triton kernel read and write? Run: python examples/analyze_kernel.py

No GPU is needed: the analysis reads the kernel's TTIR, generated for an explicit target.
"""

import torch
import triton
import triton.language as tl

import kernelpick


@triton.jit
def axpy(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, y + alpha * tl.load(x_ptr + offs, mask=mask), mask=mask)


if __name__ == "__main__":
    x = torch.empty(4096, device="meta")  # real, CPU, meta or fake tensors all work
    y = torch.empty(4096, device="meta")
    access = kernelpick.analyze(axpy, x, y, 2.0, 4096, BLOCK=1024)
    print(access.mutated)  # ('y_ptr',)
    print(access.read)  # ('x_ptr', 'y_ptr')
    print(access.certain)  # True
    print(access.access("x_ptr"), access.access("y_ptr"), access.access("n"))  # read both untouched
