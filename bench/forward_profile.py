"""Where a compiled Llama MLP forward's host time goes: cProfile of `kernelpick.ops` forwards.

bench/llama_mlp.py measures each variant's host time per forward; this script shows where the
kernelpick variant's goes, per M, with the top functions by own time (cProfile of the compiled
forward, kernelpick's and the plain block's under Inductor's max-autotune), the kernels one forward
launches (torch.profiler: names, counts, mean GPU µs), and the launches in the code Inductor
generated for each compiled variant. Every cache starts empty (Inductor's FX graph and AOTAutograd
caches off, so the code is generated here). Run on a GPU machine:

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
    parser.add_argument("--warm-caches", action="store_true", help="keep existing caches")
    args = parser.parse_args()
    from gemm_suite import fresh_caches

    fresh_caches(args)  # before torch is imported

    import torch
    import torch.nn.functional as F
    from common import environment, write_result
    from reference_gap import kernels
    from torch._inductor.utils import run_and_get_code

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
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    autotuned = "max-autotune-no-cudagraphs"
    with torch.no_grad():
        for m in [int(v) for v in args.m.split(",")]:
            torch._dynamo.reset()
            x = torch.randn(m, hidden, device="cuda", generator=gen).bfloat16()
            variants = {"kernelpick compiled": torch.compile(block), "kernelpick eager": block,
                        "plain compiled": torch.compile(plain), "plain eager": plain,
                        "plain max-autotune": torch.compile(plain, mode=autotuned)}  # fmt: skip
            host: dict[str, float] = {}
            code: dict[str, list[str]] = {}
            launched: dict[str, Any] = {}
            for name, fn in variants.items():
                if name.endswith("eager"):
                    fn(x)
                else:  # the launches of Inductor's wrapper code: kernels' runs and extern calls
                    _, codes = run_and_get_code(fn, x)
                    code[name] = [line.strip() for text in codes for line in text.splitlines()
                                  if ".run(" in line or "extern_kernels." in line or "torch.ops." in line
                                  or "empty_strided" in line]  # fmt: skip
                for _ in range(3):
                    fn(x)
                torch.cuda.synchronize()
                launched[name] = kernels(lambda fn=fn, x=x: fn(x), calls=1)
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                host[name] = (time.perf_counter() - start) / args.calls * 1e6
                torch.cuda.synchronize()
            profiles: dict[str, list[str]] = {}
            for name in ("kernelpick compiled", "plain max-autotune"):
                profile = cProfile.Profile()
                compiled = variants[name]
                profile.enable()
                for _ in range(args.calls):
                    compiled(x)
                profile.disable()
                torch.cuda.synchronize()
                stream = io.StringIO()
                pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(25)
                profiles[name] = stream.getvalue().splitlines()[:50]
            report["sizes"][m] = {
                "host_us_per_forward": host,
                "profile": profiles,
                "kernels": launched,
                "code": code,
            }
            print(f"M={m} host us per forward:", {k: round(v, 1) for k, v in host.items()})
            for name in launched:
                print(f"  {name} kernels:", {k[:60]: v["count"] for k, v in launched[name].items()})
            for name, lines in code.items():
                print(f"  {name} code:\n    " + "\n    ".join(lines))
            for name, lines in profiles.items():
                print(f"  {name} profile:\n" + "\n".join(lines[:40]))
    print(f"wrote {write_result('forward_profile', report)}")


if __name__ == "__main__":
    main()
