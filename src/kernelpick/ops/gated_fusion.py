"""`fuse_gated`: a graph pass that turns a gated MLP written with `ops.mm` into one `ops.gated_mm`."""

from __future__ import annotations

import hashlib
import operator
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kernelpick import settings

_PRODUCTS = {operator.mul, torch.mul, torch.Tensor.mul}
#: Activation functions as Dynamo records them, with the keyword values under which they are the
#: activation gated_mm applies (each of `GATED_ACTIVATIONS`).
_ACTIVATIONS: dict[Any, tuple[str, dict[str, Any]]] = {
    F.silu: ("silu", {"inplace": False}),
    F.gelu: ("gelu", {"approximate": "none"}),
    F.relu: ("relu", {"inplace": False}),
    torch.relu: ("relu", {}),
}


def _mm(node: Any) -> bool:
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and node.target in (torch.ops.kernelpick.mm.default, torch.ops.kernelpick.mm)
        and len(node.args) == 2
        and not node.kwargs
    )


def _activation(node: Any) -> str | None:
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or len(node.args) != 1:
        return None
    found = _ACTIVATIONS.get(node.target)
    if found is None or any(node.kwargs.get(k, v) != v for k, v in found[1].items()):
        return None
    if set(node.kwargs) - set(found[1]):
        return None
    return found[0]


def _alike(b_gate: Any, b_up: Any) -> bool:
    """Whether the two weights have one shape, as gated_mm takes them (a product may broadcast one
    `mm`'s output over the other's: a gate of one column); assumed where the graph records no values
    (one `torch.fx.symbolic_trace` made)."""
    gate, up = (
        b.meta.get("val", b.meta.get("example_value")) if isinstance(b, torch.fx.Node) else b
        for b in (b_gate, b_up)
    )
    if not isinstance(gate, torch.Tensor) or not isinstance(up, torch.Tensor):
        return True
    from torch.fx.experimental.symbolic_shapes import statically_known_true  # loaded by the tracer

    return gate.dim() == up.dim() and all(statically_known_true(g == u) for g, u in zip(gate.shape, up.shape))


def _fuse(product: torch.fx.Node, activated: Any, up: Any) -> bool:
    """Replace `product` = activated * up where they are a gated MLP's; whether it did."""
    name = _activation(activated)
    if name is None or not _mm(up) or activated is up:
        return False
    gate = activated.args[0]
    if not _mm(gate) or gate is up or gate.args[0] is not up.args[0] or not _alike(gate.args[1], up.args[1]):
        return False
    if len(gate.users) != 1 or len(activated.users) != 1 or len(up.users) != 1:
        return False  # another node reads a product or the activation: nothing to save
    graph = product.graph
    with graph.inserting_before(product):
        fused = graph.call_function(
            torch.ops.kernelpick.gated_mm.default,
            (gate.args[0], gate.args[1], up.args[1]),
            {"activation": name},
        )
    fused.meta.update(product.meta)
    product.replace_all_uses_with(fused)
    for dead in (product, activated, gate, up):
        graph.erase_node(dead)
    return True


def fuse_gated(graph: torch.fx.Graph | torch.fx.GraphModule) -> int:
    """Replace each `act(kernelpick.mm(x, g)) * kernelpick.mm(x, u)` of `graph` whose products and
    activation nothing else reads by `kernelpick.gated_mm(x, g, u, activation=act)`.

    Args:
        graph: a Dynamo graph (what Inductor's pre-grad passes get) or its module (recompiled after).

    Returns:
        How many it replaced.
    """
    nodes = graph.graph if isinstance(graph, torch.fx.GraphModule) else graph
    fused = 0
    for node in list(nodes.nodes):
        if node.op != "call_function" or node.target not in _PRODUCTS or len(node.args) != 2 or node.kwargs:
            continue
        first, second = node.args
        if _fuse(node, first, second) or _fuse(node, second, first):
            fused += 1
    if fused and isinstance(graph, torch.fx.GraphModule):
        graph.recompile()
    return fused


def fuse_when_compiled() -> None:
    """Add `fuse_gated` to Inductor's pre-grad passes (`torch._inductor.config.pre_grad_custom_pass`),
    after the passes set there, where `KERNELPICK_OPS_FUSION` is on and Inductor is loaded, unless
    it is there already. The fake implementation of `kernelpick.mm` calls it: Dynamo runs that while
    it traces a graph for `torch.compile` (which has loaded Inductor), before Inductor compiles the
    graph. Importing Inductor's configuration here instead would cost a program that never compiles
    about a second (docs/benchmarks.md)."""
    config: Any = sys.modules.get("torch._inductor.config")
    if config is None or not settings.current().ops_fusion:
        return
    earlier = _passes(config.pre_grad_custom_pass)
    if not any(isinstance(step, _GatedFusion) for step in earlier):
        config.pre_grad_custom_pass = _gated_fusion(earlier)


def _passes(value: Any) -> tuple[Callable[[torch.fx.Graph], Any], ...]:
    """The passes an Inductor custom-pass setting holds: None, one, or (newer torch) a sequence."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


class _GatedFusion:
    """Marks the pass `_gated_fusion` makes."""


def _gated_fusion(earlier: tuple[Callable[[torch.fx.Graph], Any], ...]) -> Any:
    """The pre-grad pass running `earlier`, then `fuse_gated` while `KERNELPICK_OPS_FUSION` is on."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class GatedFusion(CustomGraphPass, _GatedFusion):
        """Its uuid keys Inductor's caches; None, which bypasses them, where an earlier pass has none."""

        def __call__(self, graph: torch.fx.Graph) -> None:
            for step in earlier:
                step(graph)
            if settings.current().ops_fusion:
                fuse_gated(graph)

        def uuid(self) -> Any:
            ids = [step.uuid() if isinstance(step, CustomGraphPass) else None for step in earlier]
            if any(i is None for i in ids):
                return None
            source = Path(__file__).read_text() + repr((ids, settings.current().ops_fusion))
            return hashlib.sha256(source.encode()).hexdigest()

    return GatedFusion()
