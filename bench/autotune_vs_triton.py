"""kernelpick.autotune vs triton.autotune on the 48-config bf16 matmul space at M=N=K=4096 (issue 2).

Measures, each tuner in its own fresh process with fresh caches:
  (a) cold tuning wall time: kernelpick with its defaults (isolated workers on a GPU), and in the
      caller's process (KERNELPICK_ISOLATE=0) as a second row. As in a script, the kernel is
      decorated first, then the inputs are made, then the first call is timed; the time from the
      decoration to the first result is kept too. A third row waits for the workers to be ready
      before the first call (`kernelpick.start_workers(wait=True)`): a program whose own set-up
      outlasts the workers' start; a fourth calls `torch.cuda.is_available()` before anything else, as
      many scripts do (it makes every process forked afterwards a bad fork for CUDA);
  (b) first-call overhead in a new process with the store (and Triton's kernel cache) warm;
  (c) per-call host time at 64x64x64 of the tuned kernel vs a raw `kernel[grid]` launch;
  (d) TFLOP/s of each pick and of torch.mm, and each pick vs the truly fastest config found by
      re-measuring all 48 interleaved (>= 200 timed runs each, L2 flushed before each run).
Writes bench/results/autotune_vs_triton-<device>.json. Run: python bench/autotune_vs_triton.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIZE = 4096
SMALL = 64
sys.path.insert(0, str(Path(__file__).resolve().parent))
from autotune_space import SPACE, triton_configs  # noqa: E402


def config_name(config: Any) -> str:
    return (
        ",".join(f"{k}={v}" for k, v in sorted(config.kwargs.items()))
        + f",w{config.num_warps},s{config.num_stages}"
    )


def make_inputs(size: int):  # type: ignore[no-untyped-def]
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    return a, b, c


def launch(kernel, a, b, c):  # type: ignore[no-untyped-def]
    import triton

    from kernelpick.demo import matmul_arguments

    m, n = a.shape[0], b.shape[1]
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](*matmul_arguments(a, b, c))


def make_tuner(which: str):  # type: ignore[no-untyped-def]
    import triton

    from kernelpick.demo import matmul_kernel

    if which == "triton":
        return triton.autotune(triton_configs(), key=["M", "N", "K"])(triton.jit(matmul_kernel.fn))
    # Made at import, as a user's module makes it (its import is what the cold figures time from).
    import tuned_matmul

    return tuned_matmul.tuned_matmul


# -- roles: each runs in a fresh process --------------------------------------------------------


def role_cold(which: str) -> dict[str, Any]:
    import logging

    import torch

    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(f"{record.relativeCreated / 1e3:.2f} s {record.getMessage()}")

    logging.getLogger("kernelpick").addHandler(Keep(logging.INFO))
    logging.getLogger("kernelpick").setLevel(logging.INFO)
    if os.environ.get("BENCH_CUDA_CHECKED"):  # a script's first line: `if torch.cuda.is_available():`
        torch.cuda.is_available()
    decorated = time.perf_counter()
    kernel = make_tuner(which)  # as a script's import would
    a, b, c = make_inputs(SIZE)
    if os.environ.get("BENCH_WORKERS_READY"):  # a program whose set-up outlasts the workers' start
        import kernelpick

        kernelpick.start_workers(wait=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    launch(kernel, a, b, c)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=3e-2, atol=1.0)
    data: dict[str, Any] = {
        "seconds": seconds,
        "since_decoration_s": time.perf_counter() - decorated,
        "best": config_name(kernel.best_config),
        "log": messages[:40],
    }
    if which != "triton":
        record = kernel.last_tuning
        data["statuses"] = {config_name(cfg): r.status for cfg, r in record.results.items()}
        data["medians_ms"] = {config_name(cfg): r.median_ms for cfg, r in record.results.items() if r.ok}
        data["isolated"] = not any("not in workers" in m for m in messages)
        data["timers"] = sorted({r.timing.timer for r in record.results.values() if r.timing is not None})
        data["note"] = record.note
        data["from_store"] = record.from_store
        data["phases"] = dict(record.phases)
    return data


def role_first_call(which: str) -> dict[str, Any]:
    """First call in a new process (store and Triton cache warm) vs the steady-state call."""
    import torch

    a, b, c = make_inputs(SIZE)
    if which == "raw":
        from kernelpick.demo import matmul_arguments, matmul_kernel

        best = json.loads(os.environ["BENCH_BEST"])
        import triton

        args = matmul_arguments(a, b, c)

        def call() -> None:
            grid = (triton.cdiv(SIZE, best["BLOCK_M"]) * triton.cdiv(SIZE, best["BLOCK_N"]),)
            matmul_kernel[grid](*args, **best)
    else:
        from kernelpick.demo import matmul_arguments, matmul_kernel

        kernel = make_tuner("kernelpick")
        # Time Triton's own share of the first call (loading the binary from Triton's cache, hashing
        # its toolchain, building the launcher): what a raw first launch pays too.
        inside_triton = []
        triton_run = matmul_kernel.run

        def timed_run(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return triton_run(*args, **kwargs)
            finally:
                inside_triton.append(time.perf_counter() - start)

        matmul_kernel.run = timed_run

        def call() -> None:
            launch(kernel, a, b, c)

    import cProfile
    import io
    import pstats

    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    call()
    torch.cuda.synchronize()
    profiler.disable()
    first = time.perf_counter() - start
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(40)
    steady = []
    for _ in range(20):
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        steady.append(time.perf_counter() - start)
    data = {
        "first_ms": first * 1e3,
        "steady_ms": sorted(steady)[len(steady) // 2] * 1e3,
        "profile": stream.getvalue().splitlines()[:80],
    }
    if which != "raw":
        data["from_store"] = kernel.last_tuning.from_store
        data["triton_share_ms"] = inside_triton[0] * 1e3
        data["kernelpick_share_ms"] = (first - inside_triton[0]) * 1e3
    return data


def role_per_call() -> dict[str, Any]:
    """Host time per call at 64x64x64: tuned (kernelpick, triton) vs a raw launch with a fixed config."""
    import torch
    import triton

    from kernelpick.demo import matmul_arguments, matmul_kernel

    a, b, c = make_inputs(SMALL)
    fixed = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}
    ours = make_tuner("kernelpick")
    theirs = make_tuner("triton")
    args = matmul_arguments(a, b, c)
    grid = lambda meta: (triton.cdiv(SMALL, meta["BLOCK_M"]) * triton.cdiv(SMALL, meta["BLOCK_N"]),)  # noqa: E731
    calls = {
        "raw": lambda: matmul_kernel[grid](*args, **fixed),
        "kernelpick": lambda: ours[grid](*args),
        "triton_autotune": lambda: theirs[grid](*args),
    }
    for call in calls.values():  # tune and warm up
        call()
        call()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(30):  # interleaved batches, median of batch means
        for name, call in calls.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(200):
                call()
            samples[name].append((time.perf_counter() - start) / 200 * 1e6)
            torch.cuda.synchronize()
    medians = {name: sorted(v)[len(v) // 2] for name, v in samples.items()}
    return {"us_per_call": medians, "samples_us": samples}


def role_truth() -> dict[str, Any]:
    """All 48 configs re-measured interleaved, >= 200 timed runs each; torch.mm alongside."""
    import torch
    import triton

    from kernelpick.demo import matmul_arguments, matmul_kernel

    a, b, c = make_inputs(SIZE)
    flops = 2 * SIZE**3
    flush = torch.empty(torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.int8, device="cuda")
    configs = triton_configs()
    args = matmul_arguments(a, b, c)
    runs = {}
    for cfg in configs:
        kw = {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        grid = (triton.cdiv(SIZE, kw["BLOCK_M"]) * triton.cdiv(SIZE, kw["BLOCK_N"]),)

        def run(kw=kw, grid=grid) -> None:  # type: ignore[no-untyped-def]
            matmul_kernel[grid](*args, **kw)

        try:
            run()
            torch.cuda.synchronize()
            runs[config_name(cfg)] = run
        except Exception as error:  # out of resources etc.
            print(f"skip {config_name(cfg)}: {type(error).__name__}", file=sys.stderr)
    runs["torch.mm"] = lambda: torch.mm(a, b, out=c)
    for run in runs.values():
        for _ in range(5):
            run()
    rounds = 200
    events = {
        name: [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(rounds)
        ]
        for name in runs
    }
    for r in range(rounds):
        for name, run in runs.items():
            flush.zero_()
            start, end = events[name][r]
            start.record()
            run()
            end.record()
    torch.cuda.synchronize()
    medians = {}
    for name, pairs in events.items():
        times = sorted(s.elapsed_time(e) for s, e in pairs)
        medians[name] = times[len(times) // 2]
    return {
        "rounds": rounds,
        "median_ms": medians,
        "tflops": {name: flops / (ms * 1e-3) / 1e12 for name, ms in medians.items()},
    }


# -- orchestration ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role")
    parser.add_argument("--which", default="kernelpick")
    args = parser.parse_args()
    if args.role:
        result = {
            "cold": lambda: role_cold(args.which),
            "first_call": lambda: role_first_call(args.which),
            "per_call": role_per_call,
            "truth": role_truth,
        }[args.role]()
        print(json.dumps(result))
        return

    sys.path[:0] = [str(Path(__file__).resolve().parent)]
    from common import environment, run_role, write_result

    work = Path(tempfile.mkdtemp(prefix="kp-bench-"))
    report: dict[str, Any] = {"environment": environment(), "space": SPACE, "size": SIZE}
    # (a) cold tuning, each in a fresh process with fresh caches.
    cold: dict[str, Any] = {}
    for name, env in {
        "triton": {"TRITON_CACHE_DIR": str(work / "triton-cache-t")},
        "kernelpick": {
            "TRITON_CACHE_DIR": str(work / "triton-cache-kp"),
            "KERNELPICK_CACHE_DIR": str(work / "kp-p"),
        },
        "kernelpick_inprocess": {
            "TRITON_CACHE_DIR": str(work / "triton-cache-ki"),
            "KERNELPICK_CACHE_DIR": str(work / "kp-i"),
            "KERNELPICK_ISOLATE": "0",
        },
        "kernelpick_workers_ready": {
            "TRITON_CACHE_DIR": str(work / "triton-cache-kw"),
            "KERNELPICK_CACHE_DIR": str(work / "kp-w"),
            "BENCH_WORKERS_READY": "1",
        },
        "kernelpick_cuda_checked": {
            "TRITON_CACHE_DIR": str(work / "triton-cache-kc"),
            "KERNELPICK_CACHE_DIR": str(work / "kp-c"),
            "BENCH_CUDA_CHECKED": "1",
        },
    }.items():
        cold[name] = run_role(
            Path(__file__), "cold", env, "--which", "triton" if name == "triton" else "kernelpick"
        )
        print(f"cold {name}: {cold[name]['seconds']:.2f} s, best {cold[name]['best']}", flush=True)
    report["cold"] = cold
    report["speedup_vs_triton"] = {
        m: cold["triton"]["seconds"] / cold[m]["seconds"]
        for m in ("kernelpick", "kernelpick_inprocess", "kernelpick_workers_ready", "kernelpick_cuda_checked")
    }

    # (b) first call in a new process, store and Triton cache warm (from the default path's run).
    warm_env = {
        "TRITON_CACHE_DIR": str(work / "triton-cache-kp"),
        "KERNELPICK_CACHE_DIR": str(work / "kp-p"),
    }
    best_cfg = cold["kernelpick"]["best"]
    best = {}
    for part in best_cfg.split(","):
        if "=" in part:
            key, value = part.split("=")
            best[key] = int(value)
        elif part.startswith("w"):
            best["num_warps"] = int(part[1:])
        elif part.startswith("s"):
            best["num_stages"] = int(part[1:])
    report["first_call"] = {
        "kernelpick": run_role(Path(__file__), "first_call", warm_env, "--which", "kernelpick"),
        "raw": run_role(
            Path(__file__), "first_call", {**warm_env, "BENCH_BEST": json.dumps(best)}, "--which", "raw"
        ),
        "kernelpick_cold_triton_cache": run_role(
            Path(__file__),
            "first_call",
            {
                "TRITON_CACHE_DIR": str(work / "triton-cache-fresh"),
                "KERNELPICK_CACHE_DIR": warm_env["KERNELPICK_CACHE_DIR"],
            },
            "--which",
            "kernelpick",
        ),
    }
    fc = report["first_call"]
    # What kernelpick adds to a first call: the whole call minus the time inside Triton's own launch
    # (measured in the same call, so process-to-process variation of Triton's start-up cancels).
    fc["overhead_ms"] = fc["kernelpick"]["kernelpick_share_ms"]
    fc["overhead_vs_raw_first_call_ms"] = fc["kernelpick"]["first_ms"] - fc["raw"]["first_ms"]
    print(
        f"first call: kernelpick {fc['kernelpick']['first_ms']:.1f} ms, raw {fc['raw']['first_ms']:.1f} ms",
        flush=True,
    )

    # (c) per-call overhead at 64^3.
    report["per_call"] = run_role(
        Path(__file__),
        "per_call",
        {"TRITON_CACHE_DIR": str(work / "tc-small"), "KERNELPICK_CACHE_DIR": str(work / "kp-small")},
    )
    print(f"per call (us): {report['per_call']['us_per_call']}", flush=True)

    # (d) the truth: all configs interleaved.
    truth = run_role(Path(__file__), "truth", {"TRITON_CACHE_DIR": str(work / "triton-cache-t")})
    report["truth"] = truth
    best_ms = min(v for k, v in truth["median_ms"].items() if k != "torch.mm")
    best_name = min((k for k in truth["median_ms"] if k != "torch.mm"), key=truth["median_ms"].__getitem__)
    report["picks"] = {}
    for name in cold:
        pick = cold[name]["best"]
        ms = truth["median_ms"].get(pick)
        report["picks"][name] = {
            "config": pick,
            "median_ms": ms,
            "tflops": truth["tflops"].get(pick),
            "vs_fastest": best_ms / ms if ms else None,
        }
    report["fastest"] = {"config": best_name, "median_ms": best_ms, "tflops": truth["tflops"][best_name]}
    report["torch_mm_tflops"] = truth["tflops"]["torch.mm"]

    path = write_result("autotune_vs_triton", report)
    print(f"\nwrote {path}")
    print(f"{'':24}{'cold s':>9}{'pick TFLOP/s':>14}{'vs fastest':>12}")
    for name in cold:
        p = report["picks"][name]
        print(
            f"{name:24}{cold[name]['seconds']:9.2f}{(p['tflops'] or 0):14.1f}{(p['vs_fastest'] or 0):12.3f}"
        )
    print(
        f"fastest {best_name}: {report['fastest']['tflops']:.1f} TFLOP/s; torch.mm {report['torch_mm_tflops']:.1f}"
    )
    print(f"speedup vs triton.autotune: {report['speedup_vs_triton']}")
    pc = report["per_call"]["us_per_call"]
    print(
        f"per call us: raw {pc['raw']:.1f}, kernelpick {pc['kernelpick']:.1f}, triton.autotune {pc['triton_autotune']:.1f}"
    )
    print(
        f"first call ms: kernelpick {fc['kernelpick']['first_ms']:.1f} (its own share {fc['overhead_ms']:.1f}, "
        f"steady {fc['kernelpick']['steady_ms']:.2f}), raw {fc['raw']['first_ms']:.1f}, "
        f"cold triton cache {fc['kernelpick_cold_triton_cache']['first_ms']:.1f}"
    )
    for name in ("kernelpick", "kernelpick_inprocess", "kernelpick_workers_ready"):
        phases = ", ".join(f"{k} {v:.2f}" for k, v in cold[name].get("phases", {}).items())
        print(f"{name} phases (s): {phases}; since decoration {cold[name]['since_decoration_s']:.2f} s")


if __name__ == "__main__":
    main()
