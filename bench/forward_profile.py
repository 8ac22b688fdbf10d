"""Where a compiled Llama MLP forward's host time goes: cProfile of `kernelpick.ops` forwards.

bench/llama_mlp.py measures each variant's host time per forward; this script shows where the
kernelpick variant's goes, per M, with the top functions by own time. Run on a GPU machine:

    PYTHONPATH=src:bench python3 bench/forward_profile.py --m 1,128

Writes bench/results/forward_profile-<device>.json.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", default="1,128", help="comma-separated token counts")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from common import environment, write_result

    import kernelpick.ops as ops

    hidden, intermediate = 4096, 14336
    gen = torch.Generator(device="cuda").manual_seed(0)
    gate, up = (torch.randn(intermediate, hidden, device="cuda", generator=gen).bfloat16() for _ in range(2))
    down = torch.randn(hidden, intermediate, device="cuda", generator=gen).bfloat16()

    def block(x: torch.Tensor) -> torch.Tensor:
        return ops.mm(F.silu(ops.mm(x, gate.t())) * ops.mm(x, up.t()), down.t())

    def plain(x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)

    report: dict[str, Any] = {"environment": environment(), "sizes": {}}
    with torch.no_grad():
        for m in [int(v) for v in args.m.split(",")]:
            torch._dynamo.reset()
            x = torch.randn(m, hidden, device="cuda", generator=gen).bfloat16()
            variants = {"kernelpick compiled": torch.compile(block), "kernelpick eager": block,
                        "plain compiled": torch.compile(plain), "plain eager": plain}  # fmt: skip
            host: dict[str, float] = {}
            for name, fn in variants.items():
                for _ in range(3):
                    fn(x)
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                host[name] = (time.perf_counter() - start) / args.calls * 1e6
                torch.cuda.synchronize()
            profile = cProfile.Profile()
            compiled = variants["kernelpick compiled"]
            profile.enable()
            for _ in range(args.calls):
                compiled(x)
            profile.disable()
            torch.cuda.synchronize()
            stream = io.StringIO()
            pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(30)
            lines = stream.getvalue().splitlines()
            report["sizes"][m] = {"host_us_per_forward": host, "profile": lines[:60]}
            print(f"M={m} host us per forward:", {k: round(v, 1) for k, v in host.items()})
            print("\n".join(lines[:45]))
    print(f"wrote {write_result('forward_profile', report)}")


if __name__ == "__main__":
    main()
