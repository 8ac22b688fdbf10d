"""Ranks tuning together (issue 25): N ranks under torchrun against one rank tuning alone.

Run on a machine of 2 or 4 GPUs from the repository root (the device tool's prelude first):

    source bench/gpu_prelude.sh
    python3 bench/ranks.py                   # one rank alone, then 2 ranks (and 4 where 4 GPUs are seen)
    python3 bench/ranks.py --ranks 1,2       # the same, named (each run takes minutes: split them
    python3 bench/ranks.py --ranks 4         # over commands; each adds its runs to the results file)
    python3 bench/ranks.py --dry --out /tmp  # the same bookkeeping on the CPU (see below)

Every rank tunes the same keys in the same order, as the ranks of a tensor-parallel job do in eager
code: the 24 GEMM-suite shapes (M = 16, 128, 2048, 8192 by the six Llama (N, K) pairs of
bench/gemm_suite.py, bf16 `x @ W.T`) through `kernelpick.ops.mm`, then the 48-config matmul space of
the autotuning benchmarks (bench/autotune_space.py) at 3 sizes. Each run is a fresh job (`python3 -m
torch.distributed.run --nproc-per-node N`; the one-rank run is a plain process) with fresh caches:
KERNELPICK_CACHE_DIR and TRITON_CACHE_DIR in a new folder that all its ranks share. Each rank uses
its own GPU (`LOCAL_RANK`); the one rank alone uses GPU 0 (KERNELPICK_DEVICES=0).

Per rank and key: the pick and the seconds of the key's first call (tuning and one run, the GPU
synchronized before and after), and of it the seconds spent waiting for other ranks. Per run: each
rank's total, and the job's (its slowest rank's: when the job can go on). Targets: every rank's pick
identical for every key; the job's total at most 0.6x (2 ranks) and 0.35x (4 ranks) of one rank's
alone. Results go to bench/results/ranks-<device>.json (date, versions, raw figures, the targets;
and to $OUT where it is set), merged with the runs earlier invocations wrote for the same device.

Where a rank's seconds go, across its workers and compilers too: py-spy (its manylinux wheel carried
in .whl/, which bench/gpu_prelude.sh installs into /tmp/site) samples every process of a run,
`/tmp/site/bin/py-spy record --subprocesses --idle --nonblocking --rate 100 -f raw -o $OUT/ranks2.raw
-- python3 bench/ranks.py --ranks 2 --out $OUT`: each line a stack under its process chain, with a
count (2026-11-30: it found the 100 ms warm-up at every key, and Jinja2 compiling a worker's every
template candidate again).

--dry runs the same jobs on the CPU (gloo, Triton's interpreter): 3 small shapes through ops.mm and
a 4-config space of the same kernel at 3 small sizes, 1 and 2 ranks; its figures say nothing about
GPUs and are written only where --out says (tests/engine/test_ranks.py runs it).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "src")]

#: The GEMM suite's first 24 shapes (bench/gemm_suite.py's SHAPES[:24]): M by six (N, K) pairs.
NK_PAIRS = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (10240, 8192), (8192, 28672))
MM_SHAPES = [(m, n, k) for m in (16, 128, 2048, 8192) for n, k in NK_PAIRS]
#: Sizes (M, N, K) the 48-config space is tuned at.
AUTOTUNE_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 2048, 4096)]
DRY_MM_SHAPES = [(16, 32, 32), (32, 16, 64), (8, 64, 32)]
DRY_AUTOTUNE_SHAPES = [(32, 32, 32), (64, 32, 32), (32, 64, 64)]
TARGETS = {"ratio_max": {"2": 0.6, "4": 0.35}, "picks_identical": True}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ranks", default="", help="comma-separated numbers of ranks (default: 2, and 4 with 4 GPUs)"
    )
    parser.add_argument("--dry", action="store_true", help="on the CPU: small shapes, a 4-config space")
    parser.add_argument("--out", default="", help="folder for the results file (default: bench/results)")
    parser.add_argument("--role", default="", help=argparse.SUPPRESS)  # "rank": one rank of a run
    parser.add_argument("--report", default="", help=argparse.SUPPRESS)  # where a run's rank 0 writes
    return parser.parse_args(argv)


# -- one rank -------------------------------------------------------------------------------------


def rank_run(args: argparse.Namespace) -> None:
    """Tune every key as one rank of a run (a plain process: a run of one), then rank 0 writes what
    every rank did to `args.report`."""
    import torch
    import torch.distributed as dist

    # Imported before CUDA is touched, as a program's imports at its top are: kernelpick can then
    # fork its zygote, from which workers start in milliseconds (`kernelpick.workers.zygote`).
    # Imported after `torch.cuda.set_device` (until 2026-11-27), each rank's first tuning waited
    # about 5 s for its workers: about what a new interpreter takes (4.4-5.3 s), where a fork from
    # the zygote takes well under a second; which it was is not measured yet.
    from kernelpick import ops

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    gpu = torch.cuda.is_available() and not args.dry
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("gloo")  # kernelpick needs the job's store only; gloo gathers the report

    tuned = tuned_kernel(args.dry)
    keys = []
    started = time.perf_counter()
    for m, n, k in DRY_MM_SHAPES if args.dry else MM_SHAPES:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16 if gpu else torch.float32)
        w = torch.randn(n, k, device=device, dtype=a.dtype)
        seconds = first_call(functools.partial(ops.mm, a, w.t()), gpu)
        record = ops.selector("mm").last_selection
        results = {row.name: row.result for row in record.candidates}
        keys.append(entry("ops.mm", (m, n, k), record.best, seconds, record.phases, results))
    for m, n, k in DRY_AUTOTUNE_SHAPES if args.dry else AUTOTUNE_SHAPES:
        from kernelpick.demo import matmul_arguments

        a = torch.randn(m, k, device=device, dtype=torch.bfloat16 if gpu else torch.float32)
        b = torch.randn(k, n, device=device, dtype=a.dtype)
        c = torch.empty(m, n, device=device, dtype=a.dtype)
        seconds = first_call(functools.partial(tuned[grid], *matmul_arguments(a, b, c)), gpu)
        record = tuned.last_tuning
        results = {str(config): result for config, result in record.results.items()}
        keys.append(entry("autotune", (m, n, k), str(record.best), seconds, record.phases, results))
    report = {
        "rank": rank,
        "world": world,
        "device": torch.cuda.get_device_name(device) if gpu else "cpu",
        "keys": keys,
        "total_s": time.perf_counter() - started,
    }
    everyone: list[Any] = [report]
    if world > 1:
        everyone = [None] * world
        dist.all_gather_object(everyone, report)
    if rank == 0:
        Path(args.report).write_text(json.dumps(everyone))
    if world > 1:
        dist.destroy_process_group()


def tuned_kernel(dry: bool) -> Any:
    """The matmul of the autotuning benchmarks tuned over its 48 configs, or over 4 small ones (dry)."""
    import triton

    import kernelpick
    from kernelpick.demo import matmul_kernel

    if dry:
        configs = [
            triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": 16, "GROUP_M": 1}, num_warps=4)
            for m in (16, 32)
            for n in (16, 32)
        ]
    else:
        from autotune_space import triton_configs

        configs = triton_configs()
    return kernelpick.autotune(configs, key=["M", "N", "K"])(matmul_kernel)


def grid(meta: dict[str, Any]) -> tuple[int]:
    import triton

    return (triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),)


def first_call(call: Any, gpu: bool) -> float:
    """Seconds of `call()`, the GPU synchronized before and after."""
    import torch

    if gpu:
        torch.cuda.synchronize()
    started = time.perf_counter()
    call()
    if gpu:
        torch.cuda.synchronize()
    return time.perf_counter() - started


def entry(
    kind: str, shape: tuple[int, int, int], pick: str, seconds: float, phases: Any, results: dict[str, Any]
) -> dict[str, Any]:
    """One key as a rank saw it; `results`: each candidate's BenchmarkResult by name."""
    failed = {name: f"{r.status}: {r.message}"[:300] for name, r in results.items() if not r.ok}
    return {
        "kind": kind,
        "shape": list(shape),
        "pick": pick,
        "seconds": seconds,
        "wait_s": float(phases.get("wait", 0.0)),
        "phases": dict(phases),
        "candidates": len(results),
        "failed": len(failed),
        "failures": dict(list(failed.items())[:3]),
    }


# -- the runs -------------------------------------------------------------------------------------


def run(ranks: int, dry: bool, folder: Path) -> dict[str, Any]:
    """One fresh job of `ranks` ranks with fresh caches in `folder`: each rank's report, and the
    seconds the job's processes took from start to end (Python's and torch's start included)."""
    report = folder / "report.json"
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(folder / "kernelpick"),
        "TRITON_CACHE_DIR": str(folder / "triton"),
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    from common import distributed_run

    if ranks == 1:
        env["KERNELPICK_DEVICES"] = "0"  # one GPU, as each rank of a job has
        command = [sys.executable, __file__]
    else:
        command = distributed_run(ranks, __file__)
    command += ["--role", "rank", "--report", str(report)] + (["--dry"] if dry else [])
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {ranks}-rank run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return {"wall_s": time.perf_counter() - started, "ranks": json.loads(report.read_text())}


def summarize(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per run: whether its ranks picked alike for every key (and the keys where they did not), each
    rank's total and the job's, and the job's time over the one rank's alone (run "1")."""
    alone = max(r["total_s"] for r in runs["1"]["ranks"])
    summary: dict[str, Any] = {}
    for name, done in runs.items():
        reports = done["ranks"]
        keys = [f"{k['kind']} {'x'.join(map(str, k['shape']))}" for k in reports[0]["keys"]]
        picks = {key: [r["keys"][i]["pick"] for r in reports] for i, key in enumerate(keys)}
        differing = {key: chosen for key, chosen in picks.items() if len(set(chosen)) > 1}
        job = max(r["total_s"] for r in reports)
        summary[name] = {
            "ranks": len(reports),
            "picks_identical": not differing,
            "differing_picks": differing,
            "rank_total_s": [r["total_s"] for r in reports],
            "rank_wait_s": [sum(k["wait_s"] for k in r["keys"]) for r in reports],
            "job_total_s": job,
            "ratio_to_alone": job / alone,
            "target_ratio_max": TARGETS["ratio_max"].get(name),
        }
        target = summary[name]["target_ratio_max"]
        summary[name]["met"] = not differing and (target is None or job / alone <= target)
    return summary


def main() -> None:
    args = parse()
    if args.role == "rank":
        rank_run(args)
        return
    import torch
    from common import RESULTS, device_slug, environment, require_kernelpick

    require_kernelpick()
    here = environment()
    gpus = torch.cuda.device_count() if not args.dry else 0
    given = [int(n) for n in args.ranks.split(",") if n]
    wanted = given or [1, 2] + ([4] if gpus >= 4 else [])
    slug = "dry" if args.dry else device_slug(here.get("device", "cpu"))
    path = Path(args.out or RESULTS) / f"ranks-{slug}.json"
    # Runs of other invocations on this device stay (e.g. --ranks 4 on a machine of 4 GPUs after
    # --ranks 1,2 on one of 2): the runs named now replace theirs.
    earlier = json.loads(path.read_text()) if path.exists() and not args.dry else {}
    runs: dict[str, dict[str, Any]] = dict(earlier.get("runs", {}))
    for ranks in wanted:
        with tempfile.TemporaryDirectory(prefix="kernelpick-ranks-") as folder:
            runs[str(ranks)] = {"environment": here, **run(ranks, args.dry, Path(folder))}
        reports = runs[str(ranks)]["ranks"]
        print(
            f"{ranks} rank(s): tuned {len(reports[0]['keys'])} keys in "
            + ", ".join(f"{r['total_s']:.1f} s" for r in reports),
            flush=True,
        )
    summary = summarize(runs) if "1" in runs else {}
    for name, figures in summary.items():
        print(
            f"{name} rank(s): job {figures['job_total_s']:.1f} s, {figures['ratio_to_alone']:.2f}x one rank "
            f"alone (target {figures['target_ratio_max']}), picks identical: {figures['picks_identical']}",
            flush=True,
        )
    data = {
        "environment": here,
        "dry": args.dry,
        "mm_shapes": DRY_MM_SHAPES if args.dry else MM_SHAPES,
        "autotune_shapes": DRY_AUTOTUNE_SHAPES if args.dry else AUTOTUNE_SHAPES,
        "targets": TARGETS,
        "summary": summary,
        "runs": dict(sorted(runs.items(), key=lambda item: int(item[0]))),
    }
    if args.dry and not args.out:
        print("a dry run: nothing written (give --out to keep it)")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, default=str) + "\n"
    path.write_text(text)
    if os.environ.get("OUT") and not args.dry:  # the device tool brings back what is under $OUT
        Path(os.environ["OUT"], path.name).write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
