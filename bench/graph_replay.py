# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Replayed from a CUDA graph, does a `kernelpick.ops` call whose pick is the reference run as fast as the
reference (issue 38, items 1 and 2)? And does a first call inside a capture work?

Per shape: `ops.mm` (bf16) or `ops.scaled_mm` (fp8) is tuned by an eager call; then `CALLS` calls of the
reference (`torch.mm`, `torch._scaled_mm`) and `CALLS` of the call through `ops` are each captured into a
CUDA graph, and the two graphs replayed in turn, `ROUNDS` rounds (CUDA events around each replay; L2
not flushed: back-to-back calls, as a model's graph runs them). Kept: the pick, the median microseconds
a call of each path, their ratio, and the kernels each graph launches (names, counts, mean GPU time,
from `torch.profiler` over one replay): where the pick is the reference they must be the same.

Then, on shapes met for the first time, the first call of `ops.mm` is made inside
`torch.cuda.graph(...)`: whether it works (the graph replays and matches `torch.mm`), or what it raised.
Last, `ops.mm` and `torch.mm` each compiled with `mode="reduce-overhead"` (CUDA graph trees) and
called in rounds (`reduce_overhead`, with `KERNELPICK_COMPILED_PICKS` as `compiled_picks`).

`--suite` replays the GEMM suites' shapes instead of the ten above: bench/gemm_suite.py's 36 bf16 and
bench/scaled_mm_suite.py's 24 fp8 ones (issue 38's parity evidence). `--inductor` adds a third graph
per shape: Inductor's GEMM (`torch.compile(mode="max-autotune-no-cudagraphs")` of the reference call,
compiled before the capture), and `speed_vs_best`: the faster of the reference and Inductor over the
call through `ops`. Cases already in the results file are kept and not run again (`--fresh`: start
anew), and no case is started past `--budget-s`: a long list runs over several calls. The summary:
the smallest `speed_vs_reference` where the pick is the reference and over all shapes, and the
smallest `speed_vs_best`.

Run on a GPU machine from the repository root: `python3 bench/graph_replay.py [--suite --inductor]`.
Writes bench/results/graph_replay-<device>.json (and to $OUT where set); with --suite
graph_replay_suite-<device>.json. Every process starts with fresh caches (kernelpick, Triton, Inductor).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import graph_of
from gemm_suite import fresh_caches
from reference_gap import kernels, operands

#: (operation, M, N, K): the suites' bf16 shapes from decode to prefill, and fp8 ones.
CASES = [
    ("mm", 1, 4096, 4096),
    ("mm", 16, 14336, 4096),
    ("mm", 128, 4096, 4096),
    ("mm", 512, 4096, 4096),
    ("mm", 2048, 6144, 4096),
    ("mm", 4096, 4096, 4096),
    ("mm", 8192, 10240, 8192),
    ("scaled_mm", 16, 6144, 4096),
    ("scaled_mm", 128, 4096, 14336),
    ("scaled_mm", 2048, 28672, 4096),
]
#: Shapes whose first call is made inside a capture (none of them is among CASES).
IN_CAPTURE = [(1, 8192, 1024), (96, 3072, 1024), (1000, 1024, 3072)]
CALLS = 20
ROUNDS = 30
#: Seconds kept free at the end of --budget-s for the rest of the run and the file.
RESERVE_S = 20.0


def suite_cases() -> list[tuple[str, int, int, int]]:
    """The GEMM suites' shapes: bench/gemm_suite.py's bf16 ones, then bench/scaled_mm_suite.py's fp8."""
    from gemm_suite import SHAPES as BF16
    from scaled_mm_suite import SHAPES as FP8

    return [("mm", *shape) for shape in BF16] + [("scaled_mm", *shape) for shape in FP8]


def inductor_call(op: str, direct: Any) -> Any:
    """The reference call compiled by Inductor's max-autotune (no CUDA graphs of its own: the caller
    captures it), compiled and tuned now."""
    import torch

    compiled = torch.compile(direct, mode="max-autotune-no-cudagraphs", fullgraph=True)
    compiled()
    torch.cuda.synchronize()
    return compiled


def case(op: str, m: int, n: int, k: int, inductor: bool = False) -> dict[str, Any]:
    import torch

    from kernelpick import ops

    direct, through_ops, selector = operands(op, m, n, k)
    started = time.perf_counter()
    through_ops()  # tunes, eagerly
    torch.cuda.synchronize()
    tuning_s = time.perf_counter() - started
    pick = ops.selector(selector).last_selection.best  # type: ignore[union-attr]
    graphs = {"reference": graph_of(direct, CALLS), "ops": graph_of(through_ops, CALLS)}
    inductor_s = None
    if inductor:
        started = time.perf_counter()
        graphs["inductor"] = graph_of(inductor_call(op, direct), CALLS)
        inductor_s = time.perf_counter() - started
    us: dict[str, list[float]] = {name: [] for name in graphs}
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for round_number in range(ROUNDS):
        order = list(graphs) if round_number % 2 == 0 else list(reversed(graphs))
        for name in order:
            begin.record()
            graphs[name].replay()
            end.record()
            end.synchronize()
            us[name].append(begin.elapsed_time(end) * 1000 / CALLS)
    found = {name: kernels(graph.replay, calls=1) for name, graph in graphs.items()}
    median = {name: statistics.median(v) for name, v in us.items()}
    entry = {
        "op": op,
        "shape": [m, n, k],
        "pick": pick,
        "tuning_s": tuning_s,
        "us_per_call": median,
        "rounds_us": us,
        "speed_vs_reference": median["reference"] / median["ops"],
        "speed_vs_best": min(median["reference"], median.get("inductor", median["reference"]))
        / median["ops"],
        "inductor_compile_s": inductor_s,
        "kernels": found,
        "same_kernels": {n: v["count"] for n, v in found["reference"].items()}
        == {n: v["count"] for n, v in found["ops"].items()},
    }
    against_inductor = f", Inductor {median['inductor']:.2f} us" if inductor else ""
    print(
        f"{op} {m}x{n}x{k}: pick {pick}; replay {median['ops']:.2f} us vs reference "
        f"{median['reference']:.2f} us ({entry['speed_vs_reference']:.3f}x){against_inductor}; "
        f"vs best {entry['speed_vs_best']:.3f}x; same kernels {entry['same_kernels']}",
        flush=True,
    )
    return entry


def summarize(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The smallest ratios over `cases`: where the pick is the reference (`torch.mm`, `torch._scaled_mm`),
    over every shape, and against the faster of the reference and Inductor (where Inductor ran)."""
    references = [c for c in cases if c["pick"] in ("torch.mm", "torch._scaled_mm")]
    with_inductor = [c for c in cases if "inductor" in c["us_per_call"]]
    return {
        "cases": len(cases),
        "reference_picks": len(references),
        "reference_pick_vs_reference_min": min((c["speed_vs_reference"] for c in references), default=None),
        "vs_reference_min": min((c["speed_vs_reference"] for c in cases), default=None),
        "with_inductor": len(with_inductor),
        "vs_best_min": min((c["speed_vs_best"] for c in with_inductor), default=None),
        "targets": {"reference_pick_vs_reference_min": 0.995, "vs_best_min": 0.99},
    }


def first_call_in_capture(m: int, n: int, k: int) -> dict[str, Any]:
    import torch

    from kernelpick import ops

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    entry: dict[str, Any] = {"shape": [m, n, k]}
    graph = torch.cuda.CUDAGraph()
    started = time.perf_counter()
    try:
        with torch.cuda.graph(graph):
            out = ops.mm(a, w.t())
    except Exception as error:  # what a user would see
        entry.update(works=False, error=f"{type(error).__name__}: {error}"[:600])
        torch.cuda.synchronize()
    else:
        entry["capture_s"] = time.perf_counter() - started
        graph.replay()
        expected = torch.mm(a, w.t())
        torch.cuda.synchronize()
        entry["max_abs_error"] = float((out - expected).abs().max())
        entry["works"] = bool(torch.allclose(out, expected, rtol=2e-2, atol=2e-1))
        entry["pick"] = ops.selector("mm").last_selection.best  # type: ignore[union-attr]
    print(f"first call in capture {m}x{n}x{k}: {entry}", flush=True)
    return entry


#: Shapes timed under torch.compile(mode="reduce-overhead"): the compiled graph replayed by CUDA graph
#: trees, `ops.mm` against `torch.mm` (bf16), M from decode to prefill.
REDUCE_OVERHEAD = [(1, 4096, 4096), (16, 14336, 4096), (2048, 6144, 4096)]


def reduce_overhead(m: int, n: int, k: int) -> dict[str, Any]:
    """Microseconds a call of `ops.mm` and of `torch.mm`, each compiled with mode="reduce-overhead"
    (warmed up and recorded by three calls, then `ROUNDS` rounds of `CALLS` calls in turn, CUDA events
    around each round), and their ratio."""
    import torch

    from kernelpick import ops

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    compiled = {
        "reference": torch.compile(lambda x, y: torch.mm(x, y.t()), mode="reduce-overhead"),
        "ops": torch.compile(lambda x, y: ops.mm(x, y.t()), mode="reduce-overhead"),
    }
    started = time.perf_counter()
    for fn in compiled.values():
        for _ in range(3):
            fn(a, w)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - started
    us: dict[str, list[float]] = {name: [] for name in compiled}
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for round_number in range(ROUNDS):
        for name in compiled if round_number % 2 == 0 else reversed(compiled):
            begin.record()
            for _ in range(CALLS):
                compiled[name](a, w)
            end.record()
            end.synchronize()
            us[name].append(begin.elapsed_time(end) * 1000 / CALLS)
    median = {name: statistics.median(v) for name, v in us.items()}
    entry = {
        "shape": [m, n, k],
        "first_calls_s": first_s,
        "us_per_call": median,
        "rounds_us": us,
        "speed_vs_reference": median["reference"] / median["ops"],
        "pick": str(ops.selector("mm").implementation(a, w.t())),
    }
    print(
        f"reduce-overhead {m}x{n}x{k}: ops.mm {median['ops']:.2f} us, torch.mm {median['reference']:.2f} us "
        f"({entry['speed_vs_reference']:.3f}x)",
        flush=True,
    )
    return entry


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="store_true", help="the GEMM suites' 36 bf16 and 24 fp8 shapes")
    parser.add_argument("--inductor", action="store_true", help="also replay Inductor's max-autotune GEMM")
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no case that would end past this")
    parser.add_argument("--fresh", action="store_true", help="start a new results file instead of resuming")
    parser.add_argument(
        "--warm-caches", action="store_true", help="keep existing caches (tuning times then mean little)"
    )
    return parser.parse_args()


def main() -> None:
    args = parse()
    begun = time.perf_counter()
    caches = fresh_caches(args)  # before torch is imported
    from common import RESULTS, device_slug, environment, require_kernelpick, write_result

    require_kernelpick()
    here = environment()
    name = "graph_replay_suite" if args.suite else "graph_replay"
    path = RESULTS / f"{name}-{device_slug(here['device'])}.json"
    report: dict[str, Any] = {} if args.fresh or not path.exists() else json.loads(path.read_text())
    report.setdefault("runs", []).append({**here, "caches": caches or "warm", "inductor": args.inductor})
    report.update(environment=here, calls_per_graph=CALLS, rounds=ROUNDS)
    done = {(c["op"], tuple(c["shape"])) for c in report.setdefault("cases", [])}
    todo = [c for c in (suite_cases() if args.suite else CASES) if (c[0], tuple(c[1:])) not in done]
    longest = 0.0
    for index, (op, m, n, k) in enumerate(todo):
        if time.perf_counter() - begun + longest + RESERVE_S > args.budget_s:
            report["left"] = [f"{op}:{m}x{n}x{k}" for op, m, n, k in todo[index:]]
            print(f"not started within --budget-s: {len(todo) - index} cases", flush=True)
            break
        started = time.perf_counter()
        report["cases"].append(case(op, m, n, k, args.inductor))
        longest = max(longest, time.perf_counter() - started)
        report["summary"] = summarize(report["cases"])
        write_result(name, report)
    else:
        report.pop("left", None)
    report["summary"] = summarize(report["cases"])
    if not args.suite:
        report["in_capture"] = [first_call_in_capture(m, n, k) for m, n, k in IN_CAPTURE]
        from kernelpick import settings

        report["compiled_picks"] = settings.current().compiled_picks
        report["reduce_overhead"] = [reduce_overhead(m, n, k) for m, n, k in REDUCE_OVERHEAD]
    print(json.dumps(report["summary"], indent=1))
    print(f"wrote {write_result(name, report)}")


if __name__ == "__main__":
    main()
