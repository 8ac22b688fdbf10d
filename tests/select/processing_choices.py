"""A processed choice in a module-level selector, so that worker processes can import it."""

from __future__ import annotations

import torch

import kernelpick


def times_transposed(a: torch.Tensor, b_transposed: torch.Tensor) -> torch.Tensor:
    """a @ b, for b given transposed."""
    return a @ b_transposed.t()


def transpose(b: torch.Tensor) -> torch.Tensor:
    return b.t().contiguous()


def swap_operands(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a @ b)^T = b^T @ a^T: the product of the swapped, transposed operands."""
    return b.t(), a.t()


def transposed(out: torch.Tensor) -> torch.Tensor:
    return out.t()


PROCESSED_MM = kernelpick.Selector(
    "processed_mm",
    [
        kernelpick.extern(torch.mm),
        kernelpick.processed(kernelpick.extern(times_transposed), prepack={1: transpose}, name="prepacked"),
        kernelpick.processed(
            kernelpick.extern(torch.mm), before=swap_operands, after=transposed, name="swapped"
        ),
    ],
    isolate=True,
)
