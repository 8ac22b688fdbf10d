"""Choices that process their inputs: a weight re-laid out on every call, or pre-packed once.

`kernelpick.processed(choice, before=..., after=..., prepack={...})` wraps a choice whose kernel wants
its inputs (or gives its output) in another form than the operation's callers use. Here a linear
layer's weight arrives as (out_features, in_features) and `rows_times` wants it as a contiguous
(in_features, out_features) matrix. Two ways to get it there:

- `before=`: re-lay it out on every call. The copy is timed with the choice: it really costs that.
- `prepack={1: ...}`: re-lay out input 1 once per weight, kept while the weight is unchanged (by
  tensor identity and `tensor._version`): made before timing and not timed, as in a program that
  packs its weights once. An in-place change to the weight packs it again on the next call.

Both are verified against the reference, `torch.nn.functional.linear`, like any choice.

    PYTHONPATH=src python examples/selection_processing.py
"""

from __future__ import annotations

import torch

from kernelpick import Selector, extern, processed, settings
from kernelpick.console import print_table


def rows_times(x: torch.Tensor, weight_rows: torch.Tensor) -> torch.Tensor:
    """x @ W^T for W^T given as a contiguous (in_features, out_features) matrix."""
    return x @ weight_rows


def to_rows(weight: torch.Tensor) -> torch.Tensor:
    return weight.t().contiguous()


def to_rows_every_call(x: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, to_rows(weight)


def main() -> None:
    selector = Selector(
        "linear",
        [
            extern(torch.nn.functional.linear),  # the reference
            processed(extern(rows_times), before=to_rows_every_call, name="re-laid out per call"),
            processed(extern(rows_times), prepack={1: to_rows}, name="packed once"),
        ],
    )
    x, weight = torch.randn(8, 512), torch.randn(1024, 512)
    with settings.override(print_tables=False):
        out = selector(x, weight)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, weight))
    record = selector.last_selection
    assert record is not None
    print(record.summary())
    print_table(record.table())

    # Whichever won, its processing runs on every call; a pre-packed weight is packed again only
    # after it changes.
    weight.mul_(0.5)  # in place: bumps weight._version
    torch.testing.assert_close(selector(x, weight), torch.nn.functional.linear(x, weight))
    print("after an in-place update of the weight, the output still matches the reference")


if __name__ == "__main__":
    main()
