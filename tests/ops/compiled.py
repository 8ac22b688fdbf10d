"""A torch.compile backend for tests of what a compiled graph holds."""

from __future__ import annotations

from typing import Any

import torch


def aot_graphs(codes: list[str]) -> Any:
    """A torch.compile backend that keeps the code of each forward graph AOTAutograd makes (what
    Inductor would compile) and runs it as it is."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    def forward(graph: torch.fx.GraphModule, inputs: Any) -> Any:
        codes.append(graph.code)
        return make_boxed_func(graph.forward)

    return aot_autograd(fw_compiler=forward)
