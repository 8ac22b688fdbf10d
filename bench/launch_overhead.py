"""Where a tuned call's host time goes: kernelpick against a raw launch of the same compiled kernel.

Issue 22 asks for a `kernelpick.autotune` call within 3 us of a raw `kernel[grid](...)` launch. The
per-call figure of bench/autotune_vs_triton.py compares the tuned kernel with a raw launch of a
*fixed* config; this script takes the raw launch with the tuned pick's own meta-parameters (the same
compiled kernel, `num_ctas` included) and adds what each step costs on its own:

- `raw_same`: `matmul_kernel[grid](*args, **pick)`, the pick's meta-parameters as keywords;
- `raw_fixed`: the fixed config of autotune_vs_triton.py (`BLOCK_K=32`, 4 warps, 3 stages);
- `kernelpick`: the tuned kernel, `tuned[grid](*args)`;
- `kernelpick_run`: `tuned.run(*args, grid=grid)` (no `functools.partial` per call);
- `triton_autotune`: `triton.autotune` over the same space;
- `fast_key`, `lookup`, `partial`: the hot path's steps without a launch.

Each is timed in batches of `--calls` calls (the GPU synchronized between batches, not inside),
interleaved over `--rounds` rounds whose order rotates; the medians of the batch means are kept, and
per round the difference kernelpick - raw_same. A cProfile of kernelpick calls follows. 64x64x64
bf16 (a launch-bound size). Writes bench/results/launch_overhead-<device>.json.

    PYTHONPATH=src:bench python3 bench/launch_overhead.py
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats
import statistics
import time
from typing import Any

from autotune_vs_triton import make_inputs, make_tuner
from common import environment, write_result

SIZE = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()

    import torch
    import triton

    from kernelpick.demo import matmul_arguments, matmul_kernel

    a, b, c = make_inputs(SIZE)
    arguments = matmul_arguments(a, b, c)
    grid = lambda meta: (triton.cdiv(SIZE, meta["BLOCK_M"]) * triton.cdiv(SIZE, meta["BLOCK_N"]),)  # noqa: E731
    ours = make_tuner("kernelpick")
    theirs = make_tuner("triton")
    ours[grid](*arguments)
    pick = dict(ours.best_config.all_kwargs())
    fixed = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}
    dispatch = ours._dispatch
    fast_key = dispatch.fast_key
    table = dispatch.fast
    key = fast_key(arguments, {})
    calls = {
        "raw_same": lambda: matmul_kernel[grid](*arguments, **pick),
        "raw_fixed": lambda: matmul_kernel[grid](*arguments, **fixed),
        "kernelpick": lambda: ours[grid](*arguments),
        "kernelpick_run": lambda: ours.run(*arguments, grid=grid),
        "triton_autotune": lambda: theirs[grid](*arguments),
        "fast_key": lambda: fast_key(arguments, {}),
        "lookup": lambda: table[key],
        "partial": lambda: functools.partial(ours.run, grid=grid, warmup=False),
    }
    for call in calls.values():  # tune, compile and warm up
        call()
        call()
    torch.cuda.synchronize()
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            call = calls[name]
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            samples[name].append((time.perf_counter() - start) / args.calls * 1e6)
        torch.cuda.synchronize()
    medians = {name: statistics.median(v) for name, v in samples.items()}
    paired = [k - r for k, r in zip(samples["kernelpick"], samples["raw_same"])]
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(5000):
        ours[grid](*arguments)
    profile.disable()
    torch.cuda.synchronize()
    stream = io.StringIO()
    pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(25)
    report: dict[str, Any] = {
        "environment": environment(),
        "size": SIZE,
        "pick": pick,
        "rounds": args.rounds,
        "calls_per_batch": args.calls,
        "us_per_call": medians,
        "kernelpick_minus_raw_same_us": {
            "median": statistics.median(paired),
            "min": min(paired),
            "max": max(paired),
        },
        "samples_us": samples,
        "profile": stream.getvalue().splitlines()[:60],
    }
    print({name: round(v, 2) for name, v in medians.items()})
    print("kernelpick - raw_same (us):", report["kernelpick_minus_raw_same_us"])
    print("\n".join(report["profile"][:40]))
    print(f"wrote {write_result('launch_overhead', report)}")


if __name__ == "__main__":
    main()
