"""Are kernelpick's picks stable across fresh processes? The same problems tuned again and again, compared.

Seven problems, each tuned `--trials` times (default 10), every trial in a fresh Python process with
its own empty KERNELPICK_CACHE_DIR (so kernelpick measures everything again) and one
TRITON_CACHE_DIR shared by all trials (so only the first trial compiles); nothing else is set, so
kernelpick runs with the defaults a user gets (isolated workers on a GPU):

- `autotune_4096`: `kernelpick.autotune` over the 48-config bf16 matmul space of
  `autotune_vs_triton.py` at M=N=K=4096 (`--size`);
- five `kernelpick.ops.mm` selections on GEMM suite shapes (bf16 `x @ W.T`), indices 0, 7, 14, 21
  and 27 of `gemm_suite.SHAPES` (`--shapes`): 16x6144x4096, 128x4096x4096, 2048x28672x4096,
  8192x4096x14336 and the decode step 1x4096x14336;
- `scaled_mm_16x4096x4096`: a `kernelpick.ops.scaled_mm` selection, fp8 (e4m3) `x @ W.T` with
  per-tensor scales and a bf16 output, its operands made as bench/scaled_mm_suite.py makes them
  (`--skip-fp8` leaves it out; a GPU below sm_89, with no fp8 tensor cores, leaves it out too).

Each trial reports, per problem, its pick, the tuning seconds, the winner's cost_ms and the record's
note. Then a last fresh process times every distinct pick of each problem interleaved:
`triton.testing.do_bench(warmup=25, rep=50, return_mode="median")` in 5 rounds, the first of each
round rotating, and keeps the median of the rounds. The target (from the issue): per problem, the
same pick in >= 9 of 10 trials (>= 90 % of them), or all picks within 1 % of each other in those
interleaved timings.

    PYTHONPATH=src python3 bench/stability.py                  # 10 trials, then the timing
    PYTHONPATH=src python3 bench/stability.py --trials 5 --shapes 0,21 --skip-autotune --skip-fp8

A trial takes tens of seconds (the first longer: it compiles into the shared Triton cache); no trial
is started that would not leave the whole run within `--budget-s` (500 s), so a slow machine gets
fewer trials rather than a killed run. A run starts `--trials` + 1 processes: one per trial, then
one that times the picks. Every trial's output and the timings go to
bench/results/stability-<device>.json (rewritten after each trial: a run's file holds that run's
trials only); a table of the problems is printed last. `--tiny` is a smoke test without a GPU
(Triton's interpreter, 64^3 and tiny GEMMs, timed with time.perf_counter): its figures mean nothing
(tests/bench_scripts/test_stability.py runs it).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_suite import SHAPES

#: M=N=K of the autotune problem, as autotune_vs_triton.SIZE. That module is imported in the roles
#: only: importing it makes the tuned kernel (autotune_space), and so starts kernelpick's workers.
SIZE = 4096
#: gemm_suite.SHAPES indices: 16x6144x4096, 128x4096x4096, 2048x28672x4096, 8192x4096x14336 and the
#: decode step 1x4096x14336 (issue 24).
DEFAULT_SHAPES = (0, 7, 14, 21, 27)
#: (M, N, K) of the fp8 `scaled_mm` problems: x (M, K) @ W.T, W (N, K), per-tensor scales.
FP8_SHAPES = ((16, 4096, 4096),)
#: `--tiny`: selection shapes for Triton's interpreter instead of the suite's (the last a decode step).
TINY_SHAPES = ((16, 64, 32), (32, 64, 64), (1, 32, 64))
TINY_FP8_SHAPES = ((16, 32, 64),)
#: The largest value of e4m3, as in scaled_mm_suite: quantizing divides by amax / FP8_MAX.
FP8_MAX = 448.0
TINY_SIZE = 64
ROUNDS = 5
#: The target: the same pick in this share of the trials, or all picks within this ratio.
MAJORITY = 0.9
SPREAD_MAX = 1.01
#: Seconds kept for the truth role when deciding whether another trial fits in --budget-s.
TRUTH_RESERVE_S = 45.0


# -- problems ------------------------------------------------------------------------------------


def selection_shapes(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    if args.skip_selection:
        return []
    if args.tiny:
        return list(TINY_SHAPES)
    return [SHAPES[int(i)] for i in args.shapes.split(",") if i]


def fp8_shapes(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    if args.skip_fp8:
        return []
    return list(TINY_FP8_SHAPES if args.tiny else FP8_SHAPES)


def problem_names(
    size: int, shapes: list[tuple[int, int, int]], autotune: bool, fp8: Sequence[tuple[int, int, int]] = ()
) -> list[str]:
    return (
        ([f"autotune_{size}"] if autotune else [])
        + [f"mm_{m}x{n}x{k}" for m, n, k in shapes]
        + [f"scaled_mm_{m}x{n}x{k}" for m, n, k in fp8]
    )


def matmul_inputs(size: int) -> tuple[Any, Any, Any]:
    """autotune_vs_triton's inputs on a GPU; float32 ones on the CPU (the interpreter's smoke test)."""
    import autotune_vs_triton as avt
    import torch

    if torch.cuda.is_available():
        return avt.make_inputs(size)  # type: ignore[no-any-return]
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen)
    b = torch.randn(size, size, generator=gen)
    return a, b, torch.empty(size, size)


def gemm_operands(m: int, n: int, k: int) -> tuple[Any, Any]:
    """bf16 `a (M, K)` and `b = W.T` with W (N, K), seeded as in gemm_suite (float32 on the CPU)."""
    import torch

    gpu = torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    dtype = torch.bfloat16 if gpu else torch.float32
    generator = torch.Generator(device=device).manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, device=device, dtype=dtype, generator=generator)
    b = torch.randn(n, k, device=device, dtype=dtype, generator=generator).t()
    return a, b


def fp8_operands(m: int, n: int, k: int) -> tuple[Any, Any, Any, Any]:
    """fp8 (e4m3) `a (M, K)`, `b = W.T` with W (N, K), and their per-tensor float32 scales, quantized
    from standard normal values as scaled_mm_suite's `--scaling tensor` makes them."""
    import torch

    gpu = torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    generator = torch.Generator(device=device).manual_seed(m * 7 + n * 3 + k)
    x = torch.randn(m, k, device=device, generator=generator)
    w = torch.randn(n, k, device=device, generator=generator)
    scale_x, scale_w = x.abs().max() / FP8_MAX, w.abs().max() / FP8_MAX
    a = (x / scale_x).to(torch.float8_e4m3fn)
    b = (w / scale_w).to(torch.float8_e4m3fn).t()
    return a, b, scale_x.float(), scale_w.float()


def scaled_mm_bf16(a: Any, b: Any, scale_a: Any, scale_b: Any) -> Any:
    """`kernelpick.ops.scaled_mm` with a bf16 output: the call the fp8 problems tune."""
    import torch

    import kernelpick.ops

    return kernelpick.ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)


def selection(kind: str) -> tuple[Callable[..., tuple[Any, ...]], Callable[..., Any], str]:
    """A selection problem's operands (of M, N, K), the call that tunes it and its selector's name."""
    import torch

    import kernelpick.ops
    from kernelpick.ops.scaled_mm import selector_name

    if kind == "scaled_mm":
        return fp8_operands, scaled_mm_bf16, selector_name(torch.bfloat16)
    return gemm_operands, kernelpick.ops.mm, "mm"


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def launch_kwargs(config: Any) -> dict[str, Any]:
    """A config's meta-parameters and compile options, as a fixed launch takes them."""
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


# -- roles: each runs in a fresh process ---------------------------------------------------------


def role_trial(
    size: int, shapes: list[tuple[int, int, int]], autotune: bool, fp8: Sequence[tuple[int, int, int]] = ()
) -> dict[str, Any]:
    """Tune every problem once (first call of each), in this order; what each picked and how."""
    import autotune_vs_triton as avt

    import kernelpick

    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(f"{record.levelname} {record.name}: {record.getMessage()}"[:500])

    logging.getLogger("kernelpick").addHandler(Keep(logging.WARNING))
    started = time.perf_counter()
    problems: dict[str, Any] = {}
    if autotune:
        kernel = avt.make_tuner("kernelpick")  # bound to a module-level name: isolated workers import it
        a, b, c = matmul_inputs(size)
        sync()
        start = time.perf_counter()
        avt.launch(kernel, a, b, c)
        sync()
        seconds = time.perf_counter() - start
        tuning = kernel.last_tuning
        winner = tuning.results.get(tuning.best)
        problems[f"autotune_{size}"] = {
            "kind": "autotune",
            "pick": avt.config_name(tuning.best),
            "config": launch_kwargs(tuning.best),
            "tuning_s": seconds,
            "cost_ms": winner.cost_ms if winner is not None and winner.ok else None,
            "median_ms": winner.median_ms if winner is not None and winner.ok else None,
            "timer": winner.timing.timer if winner is not None and winner.timing is not None else None,
            "note": tuning.note,
            "from_store": tuning.from_store,
            "phases": dict(tuning.phases),
            # kernelpick warns when it cannot measure in workers (a kernel they cannot import).
            "fell_back_in_process": any("not in workers" in m for m in messages),
            "failed": len(tuning.failed),
            "costs_ms": {avt.config_name(cfg): r.cost_ms for cfg, r in tuning.results.items() if r.ok},
        }
    problem_shapes = [("selection", "mm", s) for s in shapes] + [("scaled_mm", "scaled_mm", s) for s in fp8]
    for kind, prefix, (m, n, k) in problem_shapes:
        make_operands, call, selector_name = selection(kind)
        operands = make_operands(m, n, k)
        sync()
        start = time.perf_counter()
        call(*operands)
        sync()
        seconds = time.perf_counter() - start
        record = kernelpick.ops.selector(selector_name).last_selection
        result = record.winner.result
        problems[f"{prefix}_{m}x{n}x{k}"] = {
            "kind": kind,
            "shape": [m, n, k],
            "pick": record.best,
            "tuning_s": seconds,
            "cost_ms": result.cost_ms if result.ok else None,
            "median_ms": result.median_ms if result.ok else None,
            "timer": result.timing.timer if result.timing is not None else None,
            "note": record.note,
            "from_store": record.from_store,
            "failed": len(record.failed),
            "costs_ms": {r.name: r.result.cost_ms for r in record.candidates if r.result.ok},
        }
    return {"seconds": time.perf_counter() - started, "problems": problems, "log": messages[:40]}


def role_truth(plan_path: str) -> dict[str, Any]:
    """Every distinct pick of each problem, timed interleaved; the median of the rounds per pick."""
    import torch

    plan = json.loads(Path(plan_path).read_text())
    gpu = torch.cuda.is_available()
    if gpu:
        import triton.testing

        def time_ms(fn: Callable[[], Any]) -> float:
            return float(triton.testing.do_bench(fn, warmup=25, rep=50, return_mode="median"))
    else:  # the smoke test only: the interpreter has no device timer
        from common import wall_clock_ms as time_ms

    found: dict[str, Any] = {}
    for name, problem in plan["problems"].items():
        if problem["kind"] == "autotune":
            fns = fixed_configs(plan["size"], problem["picks"], gpu)
        else:
            fns = selection_picks(problem["kind"], *problem["shape"], list(problem["picks"]))
        errors = {pick: fn for pick, fn in fns.items() if isinstance(fn, str)}
        runs: dict[str, Callable[[], Any]] = {p: fn for p, fn in fns.items() if not isinstance(fn, str)}
        samples: dict[str, list[float]] = {pick: [] for pick in runs}
        names = list(runs)
        for round_number in range(ROUNDS):
            shift = round_number % max(len(names), 1)
            for pick in names[shift:] + names[:shift]:
                samples[pick].append(time_ms(runs[pick]))
        found[name] = {
            "median_ms": {pick: statistics.median(s) for pick, s in samples.items()},
            "rounds_ms": samples,
            "errors": errors,
        }
    return {"timer": "do_bench median" if gpu else "perf_counter (interpreter)", "problems": found}


def fixed_configs(size: int, picks: dict[str, Any], gpu: bool) -> dict[str, Any]:
    """`matmul_kernel` launched with each pick's config fixed (or why it could not be)."""
    import triton

    from kernelpick.demo import matmul_arguments, matmul_kernel

    a, b, c = matmul_inputs(size)
    args = matmul_arguments(a, b, c)
    if gpu:
        launch: Callable[..., Any] = lambda *args, grid, **kw: matmul_kernel[grid](*args, **kw)  # noqa: E731
    else:
        from kernelpick.compile.launch import launcher

        launch = launcher(matmul_kernel, True)
    fns: dict[str, Any] = {}
    for pick, kw in picks.items():
        grid = (triton.cdiv(size, kw["BLOCK_M"]) * triton.cdiv(size, kw["BLOCK_N"]),)

        def run(kw: dict[str, Any] = kw, grid: tuple[int] = grid) -> None:
            launch(*args, grid=grid, **kw)

        fns[pick] = checked(run)
    return fns


def selection_picks(kind: str, m: int, n: int, k: int, picks: list[str]) -> dict[str, Any]:
    """Each picked choice's hot-path callable on the shape's operands (or why it could not be had)."""
    import kernelpick.ops

    make_operands, call, selector_name = selection(kind)
    operands = make_operands(m, n, k)
    call(*operands)  # from the store of the last trial: nothing is measured again
    selector = kernelpick.ops.selector(selector_name)
    signature = selector.last_selection.signature
    choices = {c.name: c for c in selector.choices_for(*operands)}
    fns: dict[str, Any] = {}
    for pick in picks:
        if pick not in choices:
            fns[pick] = "not among the choices for these inputs"
            continue
        try:
            fn = choices[pick].callable_for(signature)
        except Exception as error:
            fns[pick] = f"{type(error).__name__}: {error}"[:300]
            continue
        fns[pick] = checked(lambda fn=fn: fn(*operands))
    return fns


def checked(run: Callable[[], Any]) -> Any:
    """`run` once it has run (compiled, loaded) without an error, or the error as a string."""
    try:
        run()
        sync()
    except Exception as error:
        return f"{type(error).__name__}: {error}"[:300]
    return run


# -- orchestration -------------------------------------------------------------------------------


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="A run starts --trials + 1 fresh processes (11 by default): one per trial, each tuning "
        "every problem with an empty kernelpick cache, then one timing every distinct pick. Every "
        "trial, the timings and the summary per problem go to bench/results/stability-<device>.json, "
        "rewritten after each trial: the file holds this run's trials only, not earlier runs'.",
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=10,
        help="fresh processes tuning every problem, one per trial (a last one times the picks)",
    )
    parser.add_argument(
        "--shapes",
        default=",".join(map(str, DEFAULT_SHAPES)),
        help="comma-separated indices into gemm_suite's 36 shapes (0-23: M = 16, 128, 2048, 8192; "
        "24-35: M = 1, 4)",
    )
    parser.add_argument(
        "--skip-fp8", action="store_true", help=f"leave the fp8 scaled_mm problems {list(FP8_SHAPES)} out"
    )
    parser.add_argument("--size", type=int, default=SIZE, help="M=N=K of the autotune problem")
    parser.add_argument("--skip-autotune", action="store_true", help="leave the autotune problem out")
    parser.add_argument("--skip-selection", action="store_true", help="leave the ops.mm selections out")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"smoke test without a GPU: --size {TINY_SIZE}, tiny GEMMs {list(TINY_SHAPES)} and fp8 "
        f"{list(TINY_FP8_SHAPES)}",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=500,
        help="start no trial that would end the run later than this (the truth role included)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="folder of the results file (default: bench/results)"
    )
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tiny:
        args.size = TINY_SIZE
    return args


def summarize(names: list[str], trials: list[dict[str, Any]], truth: dict[str, Any]) -> dict[str, Any]:
    """Per problem: the most common pick, the spread of the picks' timings, whether the target is met.

    `trials` are those started: one that failed counts against the majority, and a pick that could
    not be timed leaves the spread unknown (not met).
    """
    summary: dict[str, Any] = {}
    for name in names:
        picks = [t["problems"][name]["pick"] for t in trials if name in t.get("problems", {})]
        counts = collections.Counter(picks)
        top, top_count = counts.most_common(1)[0] if counts else (None, 0)
        medians = truth.get("problems", {}).get(name, {}).get("median_ms", {})
        timed = [medians[p] for p in counts if p in medians]
        spread = max(timed) / min(timed) if timed and len(timed) == len(counts) else None
        if spread is None and len(counts) == 1:
            spread = 1.0  # a single pick, however it timed
        majority = bool(trials) and top_count >= MAJORITY * len(trials)
        within = spread is not None and spread <= SPREAD_MAX
        summary[name] = {
            "distinct_picks": len(counts),
            "counts": dict(counts.most_common()),
            "top": top,
            "top_count": top_count,
            "trials": len(trials),
            "failed_trials": len(trials) - len(picks),
            "majority_met": majority,
            "spread": spread,
            "spread_met": within,
            "fastest_pick": min(medians, key=medians.__getitem__) if medians else None,
            "met": majority or within,
        }
    return summary


def save(report: dict[str, Any], folder: Path | None) -> Path:
    """Write the report to bench/results/stability-<device>.json (and $OUT), or into `folder`."""
    from common import device_slug, write_result

    if folder is None:
        return write_result("stability", report)
    path = folder / f"stability-{device_slug(report['environment']['device'])}.json"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return path


def main() -> int:
    args = parse()
    if args.role == "trial":
        plan = json.loads(Path(args.plan).read_text())
        shapes = [tuple(s) for s in plan["shapes"]]
        fp8 = [tuple(s) for s in plan.get("fp8_shapes", [])]
        print(json.dumps(role_trial(plan["size"], shapes, plan["autotune"], fp8)))
        return 0
    if args.role == "truth":
        print(json.dumps(role_truth(args.plan)))
        return 0

    from common import environment, run_role

    begun = time.perf_counter()
    shapes = selection_shapes(args)
    fp8 = fp8_shapes(args)
    here = environment()
    fp8_note = None
    if fp8 and here["device"] != "cpu" and tuple(map(int, here["capability"].split("."))) < (8, 9):
        fp8_note = f"left out: {here['device']} (sm_{here['capability']}) has no fp8 tensor cores (sm_89+)"
        print(f"fp8 problems {fp8_note}", flush=True)
        fp8 = []
    autotune = not args.skip_autotune
    names = problem_names(args.size, shapes, autotune, fp8)
    if not names:
        raise SystemExit("nothing to tune: --skip-autotune, --skip-selection and --skip-fp8 (or no fp8 here)")
    work = Path(tempfile.mkdtemp(prefix="kp-stability-"))
    triton_cache = str(work / "triton-cache")
    plan_path = work / "trial.json"
    plan_path.write_text(
        json.dumps({"size": args.size, "shapes": shapes, "autotune": autotune, "fp8_shapes": fp8})
    )
    script = Path(__file__).resolve()
    report: dict[str, Any] = {
        "environment": here,
        "settings": {
            "trials": args.trials,
            "size": args.size,
            "shapes": shapes,
            "fp8_shapes": fp8,
            "fp8_note": fp8_note,
            "autotune": autotune,
            "tiny": args.tiny,
            "rounds": ROUNDS,
            "majority": MAJORITY,
            "spread_max": SPREAD_MAX,
            "budget_s": args.budget_s,
        },
        "problems": names,
    }
    print(f"{args.trials} trials of {', '.join(names)}", flush=True)
    trials: list[dict[str, Any]] = []
    longest = 0.0
    for index in range(args.trials):
        elapsed = time.perf_counter() - begun
        # Room for one more trial (as long as the longest so far) and the truth role after it.
        if index and elapsed + longest + TRUTH_RESERVE_S > args.budget_s:
            print(f"trial {index + 1}: not started, {elapsed:.0f} s into --budget-s {args.budget_s:.0f}")
            break
        env = {"TRITON_CACHE_DIR": triton_cache, "KERNELPICK_CACHE_DIR": str(work / f"kernelpick-{index}")}
        started = time.perf_counter()
        try:
            trial = run_role(
                script, "trial", env, "--plan", str(plan_path), timeout=max(60.0, args.budget_s - elapsed)
            )
        except Exception as error:  # failed, timed out: kept, and counted against the target
            trial = {"error": f"{type(error).__name__}: {error}"[-4000:]}
        wall = time.perf_counter() - started
        longest = max(longest, wall)
        trial.update(index=index, wall_s=wall, kernelpick_cache=env["KERNELPICK_CACHE_DIR"])
        trials.append(trial)
        if "error" in trial:
            print(f"trial {index + 1}: FAILED after {wall:.1f} s: {trial['error'][-300:]}", flush=True)
            continue
        picks = " | ".join(
            f"{name} {p['pick']} ({p['tuning_s']:.1f} s{', ' + p['note'] if p['note'] else ''})"
            for name, p in trial["problems"].items()
        )
        print(f"trial {index + 1} ({wall:.1f} s): {picks}", flush=True)
        report["trials"] = trials
        save(report, args.out)  # after every trial: a run cut short keeps what it measured
    report["trials"] = trials

    done = [t for t in trials if "problems" in t]
    truth: dict[str, Any] = {}
    if done:
        problems: dict[str, Any] = {}
        for name in names:
            entries = [t["problems"][name] for t in done]
            problems[name] = {
                "kind": entries[0]["kind"],
                "shape": entries[0].get("shape"),
                "picks": {e["pick"]: e.get("config") for e in entries},  # the config of an autotune pick
            }
        truth_path = work / "truth.json"
        truth_path.write_text(json.dumps({"size": args.size, "problems": problems}))
        env = {
            "TRITON_CACHE_DIR": triton_cache,
            # The last trial's store: ops.mm reads its picks instead of measuring them again.
            "KERNELPICK_CACHE_DIR": done[-1]["kernelpick_cache"],
            # Nothing is tuned here: no idle workers beside the timings.
            "KERNELPICK_ISOLATE": "off",
        }
        print(f"timing the picks interleaved ({ROUNDS} rounds) ...", flush=True)
        try:
            elapsed = time.perf_counter() - begun
            truth = run_role(
                script, "truth", env, "--plan", str(truth_path), timeout=max(60.0, args.budget_s - elapsed)
            )
        except Exception as error:
            truth = {"error": f"{type(error).__name__}: {error}"[-4000:]}
            print(f"truth: FAILED: {truth['error'][-300:]}", flush=True)
    report["truth"] = truth
    report["summary"] = summary = summarize(names, trials, truth)
    report["all_met"] = all(s["met"] for s in summary.values())
    report["wall_s"] = time.perf_counter() - begun

    path = save(report, args.out)
    print(f"\nwrote {path} ({report['wall_s']:.0f} s, {len(done)} of {len(trials)} trials ran)")
    width = max(len(n) for n in names)
    print(f"{'problem':<{width}} {'distinct':>8} {'top count':>9} {'spread %':>9}  {'met':<4} top pick")
    for name in names:
        s = summary[name]
        spread = "-" if s["spread"] is None else f"{(s['spread'] - 1) * 100:.2f}"
        met = "yes" if s["met"] else "NO"
        print(
            f"{name:<{width}} {s['distinct_picks']:>8} {s['top_count']:>5}/{len(trials):<3} {spread:>9}  "
            f"{met:<4} {(s['top'] or '-')[:60]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
