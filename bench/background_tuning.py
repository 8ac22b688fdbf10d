"""Tuning in the background against tuning first, in a serving-like loop (issue 41, item 2).

A Llama-3 8B MLP block (bf16, `kernelpick.ops.mm` for gate, up and down, eager) is called in a loop of
`--steps` forwards, as a server answers batches: batch sizes appear one after another (a new M every
`--every` steps, from `--sizes`), and each step runs one of the sizes seen so far; after the schedule
the loop steps on through the sizes until every one runs its final picks (at most `--max-s`). Each
mode runs in a fresh process with fresh caches:

- `blocking`: the default; a new size's first forward waits for its three projections' tunings;
- `background`: `KERNELPICK_BACKGROUND=1`; a new size runs `torch.mm` at once while its projections
  are tuned in a thread, and a later forward switches to the picks;
- `stored`: every size tuned first, by a process of its own sharing the cache folder; the loop's
  process then finds every pick in the store (a deployment that starts with every key stored).

Per mode: the first forward's seconds, each step's milliseconds (the GPU synchronized after each, as
a server answers), the schedule's total (`schedule_s`), and when every size ran its final picks
(`all_final_s`, and the step). The targets: background's first forward no longer than stored's plus
the provisional pick's own time; its schedule shorter than blocking's.

Run on a GPU machine from the repository root (`source bench/gpu_prelude.sh` first):

    python3 bench/background_tuning.py                 # writes bench/results/background_tuning-<device>.json
    python3 bench/background_tuning.py --dry --out /tmp   # the bookkeeping on the CPU (float32, small)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, run_role, write_result

MODES = ("blocking", "background", "stored")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="1,2,4,8,16,32,64,128", help="batch sizes M, in the order they appear"
    )
    parser.add_argument("--every", type=int, default=25, help="a new size appears every this many steps")
    parser.add_argument("--steps", type=int, default=250, help="forwards in the loop")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument(
        "--max-s",
        type=float,
        default=300,
        help="after the schedule, step on until every pick is final, at most this long",
    )
    parser.add_argument("--dry", action="store_true", help="on the CPU: float32, a small block, few steps")
    parser.add_argument("--out", type=Path, default=None, help="folder of the results file (dry runs)")
    parser.add_argument("--role", default=None, help=argparse.SUPPRESS)  # a mode's own process
    parser.add_argument("--tune-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = [int(m) for m in args.sizes.split(",")]
    if args.dry:  # three sizes, each met a few times
        args.sizes, args.every, args.steps, args.max_s = args.sizes[:3], 3, 10, 120
    return args


def schedule(sizes: list[int], every: int, steps: int) -> list[int]:
    """The M of each step: a new size every `every` steps, each step one of the sizes seen so far
    (the newest at a size's first step, then the seen ones in a fixed, interleaved order)."""
    found = []
    for step in range(steps):
        seen = sizes[: min(len(sizes), step // every + 1)]
        found.append(seen[-1] if step % every == 0 else seen[(step * 7) % len(seen)])
    return found


def loop(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """One mode's loop, in this process."""
    import torch

    import kernelpick
    from kernelpick import ops

    device = "cpu" if args.dry else "cuda"
    dtype = torch.float32 if args.dry else torch.bfloat16
    hidden, intermediate = (32, 48) if args.dry else (4096, 14336)
    generator = torch.Generator(device=device).manual_seed(0)

    def weight(rows: int, columns: int) -> Any:
        return (torch.randn(rows, columns, device=device, generator=generator) / columns**0.5).to(dtype)

    gate, up, down = weight(intermediate, hidden), weight(intermediate, hidden), weight(hidden, intermediate)

    def forward(x: Any) -> Any:
        return ops.mm(torch.nn.functional.silu(ops.mm(x, gate.t())) * ops.mm(x, up.t()), down.t())

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    inputs = {m: torch.randn(m, hidden, device=device, generator=generator).to(dtype) for m in args.sizes}
    plan = schedule(args.sizes, args.every, args.steps)
    selector = ops.selector("mm")
    if args.tune_only:  # the `stored` mode's first process: every size tuned, stored, nothing timed
        for m in args.sizes:
            forward(inputs[m])
        sync()
        return {"tuned": len(selector.records)}
    steps_ms: list[float] = []
    all_final_s = all_final_step = None
    started = time.perf_counter()
    with torch.no_grad():
        # The schedule, then the sizes seen in turn until every one runs its final picks (background).
        step = 0
        while step < len(plan) or (all_final_s is None and time.perf_counter() - started < args.max_s):
            m = plan[step] if step < len(plan) else args.sizes[step % len(args.sizes)]
            begun = time.perf_counter()
            forward(inputs[m])
            sync()
            steps_ms.append((time.perf_counter() - begun) * 1e3)
            appeared = step >= (len(args.sizes) - 1) * args.every
            if all_final_s is None and appeared and not any(r.provisional for r in selector.records.values()):
                all_final_s, all_final_step = time.perf_counter() - started, step
            step += 1
    total_s = time.perf_counter() - started
    kernelpick.wait_for_tuning()
    first_of = {m: plan.index(m) for m in args.sizes}
    return {
        "mode": mode,
        "first_forward_s": steps_ms[0] / 1e3,
        "first_forward_of_each_size_ms": {str(m): steps_ms[i] for m, i in first_of.items()},
        "steps_ms": steps_ms[: len(plan)],  # the schedule's; the steps after it summarized below
        "after_schedule": step_summary(steps_ms[len(plan) :]),
        "plan": plan,
        "total_s": total_s,
        "schedule_s": sum(steps_ms[: len(plan)]) / 1e3,
        "median_step_ms": statistics.median(steps_ms),
        "all_final_s": all_final_s,
        "all_final_step": all_final_step,
        "keys": len(selector.records),
        "picks": sorted({r.best for r in selector.records.values()}),
        "pick_of": {str(r.signature): r.best for r in selector.records.values()},
        "provisional_left": sum(r.provisional for r in selector.records.values()),
    }


def step_summary(steps_ms: list[float]) -> dict[str, Any]:
    """How many steps, and their median, 99th percentile and largest milliseconds (None: no steps)."""
    if not steps_ms:
        return {"steps": 0}
    ordered = sorted(steps_ms)
    return {
        "steps": len(ordered),
        "median_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "max_ms": ordered[-1],
    }


def run_mode(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """Run one mode in fresh processes (fresh caches; for `stored`, a tuning process first)."""
    root = Path(tempfile.mkdtemp(prefix="background-tuning-"))
    env = {
        "KERNELPICK_CACHE_DIR": str(root / "kernelpick"),
        "TRITON_CACHE_DIR": str(root / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "KERNELPICK_BACKGROUND": "1" if mode == "background" else "0",
    }
    common = [f"--sizes={','.join(map(str, args.sizes))}", f"--every={args.every}", f"--steps={args.steps}"]
    common += ["--dry"] if args.dry else []

    def role(*extra: str) -> dict[str, Any]:
        return run_role(Path(__file__).resolve(), mode, env, *common, *extra, timeout=1800)

    tuned_s = None
    if mode == "stored":
        started = time.perf_counter()
        role("--tune-only")
        tuned_s = time.perf_counter() - started
    found = role()
    found["tuning_process_s"] = tuned_s
    return found


def summarize(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    if "background" in runs and "stored" in runs:
        summary["first_forward_background_over_stored"] = (
            runs["background"]["first_forward_s"] / runs["stored"]["first_forward_s"]
        )
    if "background" in runs and "blocking" in runs:
        summary["schedule_background_over_blocking"] = (
            runs["background"]["schedule_s"] / runs["blocking"]["schedule_s"]
        )
        summary["first_forward_blocking_s"] = runs["blocking"]["first_forward_s"]
    if "background" in runs:
        summary["all_final_s"] = runs["background"]["all_final_s"]
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.role is not None:
        print(json.dumps(loop(args, args.role)))
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"--modes: {', '.join(unknown)} unknown; expected names of {', '.join(MODES)}")
    here = environment()
    runs = {}
    for mode in modes:
        print(f"[{mode}] ...", flush=True)
        runs[mode] = run_mode(args, mode)
        run = runs[mode]
        print(
            f"[{mode}] first forward {run['first_forward_s']:.3f} s, schedule {run['schedule_s']:.2f} s, "
            f"median step {run['median_step_ms']:.2f} ms, all final at {run['all_final_s']} s",
            flush=True,
        )
    results = {
        "environment": here,
        "settings": {"sizes": args.sizes, "every": args.every, "steps": args.steps, "dry": args.dry},
        "runs": runs,
        "summary": summarize(runs),
    }
    print(json.dumps(results["summary"], indent=1))
    if args.dry or args.out is not None:
        folder = args.out or Path(tempfile.gettempdir())
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "background_tuning-dry.json"
        path.write_text(json.dumps(results, indent=1) + "\n")
    else:
        path = write_result("background_tuning", results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
