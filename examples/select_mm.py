"""Select the fastest correct matrix product for each input signature, and see why it won.

`kernelpick.Selector` picks between different implementations of one operation: here `torch.mm`
(cuBLAS on a GPU), a deliberately slow Python version, a wrong one (never chosen: its output fails
verification against the reference, `torch.mm`), and the built-in Triton GEMM template rendered for
each config. The first call with a new signature (dtype, sizes, strides, offsets) tunes; later calls
cost a key computation, one dictionary lookup and the winner's launch. Results are stored, so a
second run of this script reads them instead of measuring (run it twice and compare the tables).

On a CPU the Triton template runs in Triton's interpreter: slow, with timings that say nothing
about a GPU, but rendered, verified and timed the same way. (On a busy CPU, torch.mm's threads can
be slower than the blocked version: the tables show what was measured.)

    PYTHONPATH=src python examples/select_mm.py
"""

from __future__ import annotations

import torch

import kernelpick
from kernelpick import Config, Selector, extern, settings, template
from kernelpick.console import print_table
from kernelpick.ops.gemm_templates import GEMM


def blocked_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Correct but slow: one row block at a time."""
    return torch.cat([a[i : i + 8] @ b for i in range(0, a.shape[0], 8)])


def sloppy_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Fast and wrong: forgets the last row of B."""
    return a[:, :-1] @ b[:-1]


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    small = [Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=2)]
    gpu = [
        Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=w, num_stages=3)
        for m, n, w in ((64, 64, 4), (128, 128, 8))
    ]
    selector = Selector(
        "example_mm",
        [
            extern(torch.mm),  # the first extern is the reference outputs are checked against
            extern(blocked_mm),
            extern(sloppy_mm),
            template(
                GEMM,
                configs=gpu if device == "cuda" else small,
                constants={"ALLOW_TF32": False},
                name="triton_gemm",
            ),
        ],
    )
    a = torch.randn(64, 96, device=device, dtype=dtype)
    b = torch.randn(96, 48, device=device, dtype=dtype)
    with settings.override(print_tables=False):
        for x, y, what in ((a, b, "row-major"), (a, b.t().contiguous().t(), "column-major B")):
            out = selector(x, y)
            torch.testing.assert_close(out, torch.mm(x, y))
            record = selector.last_selection
            assert record is not None
            print(f"\n{what}: {record.summary()}")
            print_table(record.table())
    print(
        f"\nresults are stored under {settings.cache_dir()}; a second run reads them (`(stored)` in the table)"
    )
    print(
        f"built-in: kernelpick.ops.mm picked {kernelpick.ops.selector('mm').tune(a, b).best!r} for {dtype} {tuple(a.shape)}x{tuple(b.shape)}"
    )


if __name__ == "__main__":
    main()
