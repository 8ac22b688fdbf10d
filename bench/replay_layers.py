# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Captured decode blocks replayed as one layer eight times, and as eight layers with weights of their own.

`bench/llama_mlp.py`'s `replayed_us` captures 8 forwards of one block in a CUDA graph: the same
weights 8 times. A model's layers each read their own weights, so whatever of a block's weights is
left in L2 by one forward (an H200's 60 MiB of a 70B attention block's 288 MiB) is never read again
in a model, but is in that graph. A kernel that streams its weights with `evict_first` (kernelpick's
decode GEMV) leaves less of them behind than one that does not (Inductor's), so the one-layer graph
may favour the latter by what a model would never see. This script times both ways for the blocks'
products at decode sizes, for kernelpick compiled (`torch.compile` over `kernelpick.ops.mm`) and
Inductor's max-autotune compiled (`F.linear`), each graph's replays timed with events (median of
`--replays`), the variants interleaved in rounds.

Writes bench/results/replay_layers-<device>.json (date, versions, every replay's figure).
Usage: python bench/replay_layers.py [--sizes 70b-attn:1,8b-attn:1] [--layers 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, graph_of, require_kernelpick, write_result

#: (hidden, intermediate) of each model, and the K/V heads' columns of its fused QKV product.
MODELS = {"8b": (4096, 14336), "70b": (8192, 28672)}
KV_COLUMNS = 2 * 8 * 128


def products(model: str, block: str) -> dict[str, tuple[int, int]]:
    """(N, K) of each product of a block: out features, in features."""
    hidden, intermediate = MODELS[model]
    if block == "attn":
        return {"qkv": (hidden + KV_COLUMNS, hidden), "o": (hidden, hidden)}
    return {"gate": (intermediate, hidden), "up": (intermediate, hidden), "down": (hidden, intermediate)}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="70b-attn:1,70b-attn:4,8b-attn:1,8b-mlp:1", help="MODEL-BLOCK:M, ..."
    )
    parser.add_argument("--layers", type=int, default=8, help="forwards a graph; as many layers in the other")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--replays", type=int, default=20, help="timed replays a round")
    return parser.parse_args()


def main() -> int:
    args = parse()
    require_kernelpick()
    import torch
    import torch.nn.functional as functional

    import kernelpick.ops as ops
    from kernelpick.device import device_peaks

    peaks = device_peaks(torch.cuda.get_device_name())  # the weights read once at the HBM's peak

    def mlp(x: Any, w: dict[str, Any], mm: Any) -> Any:
        return mm(functional.silu(mm(x, w["gate"])) * mm(x, w["up"]), w["down"])

    def attn(x: Any, w: dict[str, Any], mm: Any) -> Any:
        return mm(x, w["qkv"]), mm(x, w["o"])

    def linear(x: Any, w: Any) -> Any:
        return functional.linear(x, w)

    def through_ops(x: Any, w: Any) -> Any:
        return ops.mm(x, w.t())

    report: dict[str, Any] = {"environment": environment(), "layers": args.layers, "sizes": []}
    for item in args.sizes.split(","):
        name, _, m_text = item.partition(":")
        model, _, block = name.partition("-")
        m = int(m_text)
        shapes = products(model, block)
        generator = torch.Generator(device="cuda").manual_seed(m)
        layers = [
            {
                p: (torch.randn(n, k, device="cuda", generator=generator) / k**0.5).bfloat16()
                for p, (n, k) in shapes.items()
            }
            for _ in range(args.layers)
        ]
        x = torch.randn(m, shapes[next(iter(shapes))][1], device="cuda", generator=generator).bfloat16()
        body = attn if block == "attn" else mlp
        torch._dynamo.reset()
        variants = {
            "kernelpick": torch.compile(lambda x, w, body=body: body(x, w, through_ops), dynamic=False),
            "inductor": torch.compile(
                lambda x, w, body=body: body(x, w, linear), mode="max-autotune-no-cudagraphs", dynamic=False
            ),
        }
        graphs = {}
        with torch.no_grad():
            for variant, fn in variants.items():
                for layout in ("one_layer", "layers"):
                    step = iter(range(1 << 30))

                    def forward(
                        fn: Any = fn, layout: str = layout, step: Any = step, layers: Any = layers, x: Any = x
                    ) -> Any:
                        w = layers[0] if layout == "one_layer" else layers[next(step) % args.layers]
                        return fn(x, w)

                    print(f"[{item}] {variant} {layout}: capturing", flush=True)
                    graphs[(variant, layout)] = graph_of(forward, args.layers, warmups=args.layers + 1)
        samples: dict[str, list[float]] = {f"{v}_{layout}": [] for v, layout in graphs}
        for _ in range(args.rounds):
            for (variant, layout), graph in graphs.items():
                graph.replay()
                torch.cuda.synchronize()
                for _ in range(args.replays):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    graph.replay()
                    end.record()
                    end.synchronize()
                    samples[f"{variant}_{layout}"].append(start.elapsed_time(end) * 1e3 / args.layers)
        us = {name: statistics.median(values) for name, values in samples.items()}
        weight_bytes = sum(n * k * 2 for n, k in shapes.values())
        floor_us = None if peaks is None else weight_bytes / (peaks.memory_gbps * 1e9) * 1e6
        entry = {
            "model": model,
            "block": block,
            "m": m,
            "weight_bytes": weight_bytes,
            "hbm_floor_us": floor_us,
            "us_per_forward": us,
            "kernelpick_vs_inductor": {
                layout: us[f"inductor_{layout}"] / us[f"kernelpick_{layout}"]
                for layout in ("one_layer", "layers")
            },
            "samples_us": samples,
        }
        report["sizes"].append(entry)
        print(
            f"[{item}] us a forward: "
            + ", ".join(f"{k} {v:.2f}" for k, v in us.items())
            + f"; kernelpick vs inductor: one layer {entry['kernelpick_vs_inductor']['one_layer']:.3f}, "
            f"{args.layers} layers {entry['kernelpick_vs_inductor']['layers']:.3f}",
            flush=True,
        )
        graphs.clear()
        layers.clear()
        torch.cuda.empty_cache()
    print(f"wrote {write_result('replay_layers', report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
