"""Ranks tuning in the background (issue 41): do the ranks of a job switch to one pick at the same call?

Two ranks under `torch.distributed.run`, each on its own GPU, call `kernelpick.ops.mm` in a loop with
`KERNELPICK_BACKGROUND=1`, as the eager decode of a tensor-parallel Llama-3 8B MLP shard does: the
gate/up and down products of M = 1 and 16 (bf16 `x @ W.T`), rank 1 starting 0.3 s after rank 0. Every
key's first call runs a provisional pick at once while the candidates are tuned in the workers; the
ranks agree through the job's store on the call at which each key switches. Per rank and key: the call
(counted per key) at which its pick became final, the seconds until then, and the pick; per rank the
seconds of the first round of calls. Target: every key switches at the same call on every rank, to the
same pick. Writes bench/results/background_ranks-<device>.json (date, versions, raw figures; and to
$OUT where it is set).

Run from the repository root on a machine of 2 GPUs (the device tool's prelude first):

    source bench/gpu_prelude.sh
    python3 bench/background_ranks.py
    python3 bench/background_ranks.py --dry --out /tmp   # gloo on the CPU, float32, small sizes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "src")]

#: (M, N, K): an 8B MLP shard of two ranks (gate and up: 7168 of 14336 outputs; down: 7168 of K).
SHAPES = [(1, 7168, 4096), (1, 4096, 7168), (16, 7168, 4096), (16, 4096, 7168)]
DRY_SHAPES = [(1, 32, 64), (16, 64, 32)]
STAGGER_S = 0.3


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--max-s", type=float, default=240.0, help="give up on keys still provisional then")
    parser.add_argument("--dry", action="store_true", help="on the CPU: gloo, float32, small sizes")
    parser.add_argument("--out", default=None, help="folder of the results file (default: bench/results)")
    parser.add_argument("--role", default="main", help=argparse.SUPPRESS)
    parser.add_argument("--report", default=None, help=argparse.SUPPRESS)
    return parser.parse_args()


def rank_run(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from kernelpick import ops  # before CUDA is touched, as a program imports it
    from kernelpick.engine.signature import signature_key

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gpu = torch.cuda.is_available() and not args.dry
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("gloo")
    dtype = torch.bfloat16 if gpu else torch.float32
    products = []
    for m, n, k in DRY_SHAPES if args.dry else SHAPES:
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(n, k, device=device, dtype=dtype).t()
        products.append(((m, n, k), a, b, signature_key((a, b), {}, None)))
    selector = ops.selector("mm")
    keys: dict[str, dict[str, Any]] = {str(list(s)): {"calls": 0, "switched_at": None} for s, *_ in products}
    dist.barrier()
    if rank == 1:
        time.sleep(STAGGER_S)
    started = time.perf_counter()
    first_round_s = None
    while time.perf_counter() - started < args.max_s:
        for shape, a, b, key in products:
            ops.mm(a, b)
            found = keys[str(list(shape))]
            found["calls"] += 1
            record = selector.records.get(key)
            if found["switched_at"] is None and record is not None and not record.provisional:
                found.update(
                    switched_at=found["calls"], seconds=time.perf_counter() - started, pick=record.best
                )
        if first_round_s is None:
            if gpu:
                torch.cuda.synchronize()
            first_round_s = time.perf_counter() - started
        if all(found["switched_at"] is not None for found in keys.values()):
            break
    report = {
        "rank": rank,
        "device": torch.cuda.get_device_name(device) if gpu else "cpu",
        "first_round_s": first_round_s,
        "loop_s": time.perf_counter() - started,
        "keys": keys,
    }
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, report)
    if rank == 0:
        Path(args.report).write_text(json.dumps(everyone))
    dist.destroy_process_group()


def main() -> None:
    args = parse()
    if args.role == "rank":
        rank_run(args)
        return
    from common import distributed_run, environment, write_result

    folder = Path(tempfile.mkdtemp(prefix="background-ranks-"))
    report = folder / "report.json"
    env = {
        **os.environ,
        "KERNELPICK_BACKGROUND": "1",
        "KERNELPICK_CACHE_DIR": str(folder / "kernelpick"),
        "TRITON_CACHE_DIR": str(folder / "triton"),
    }
    command = (
        distributed_run(args.ranks, __file__)
        + [
            "--role",
            "rank",
            "--report",
            str(report),
            "--max-s",
            str(args.max_s),
        ]
        + (["--dry"] if args.dry else [])
    )
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {args.ranks}-rank run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    ranks = json.loads(report.read_text())
    names = list(ranks[0]["keys"])
    same_call = all(len({r["keys"][n]["switched_at"] for r in ranks}) == 1 for n in names)
    same_pick = all(len({r["keys"][n].get("pick") for r in ranks}) == 1 for n in names)
    final = all(r["keys"][n]["switched_at"] is not None for r in ranks for n in names)
    summary = {"every_key_final": final, "same_call": same_call, "same_pick": same_pick}
    for name in names:
        print(
            f"{name}: "
            + "; ".join(
                f"rank {r['rank']} switched at call {r['keys'][name]['switched_at']}"
                f" ({r['keys'][name].get('seconds', float('nan')):.2f} s) to {r['keys'][name].get('pick')}"
                for r in ranks
            )
        )
    print(f"first round: {[round(r['first_round_s'], 3) for r in ranks]} s; {summary}")
    data = {
        "environment": environment(),
        "dry": args.dry,
        "stagger_s": STAGGER_S,
        "wall_s": time.perf_counter() - started,
        "ranks": ranks,
        "summary": summary,
    }
    if args.dry and args.out is None:
        print("a dry run is written only where --out says")
        return
    if args.out is not None:
        path = Path(args.out) / f"background_ranks-{'cpu' if args.dry else 'gpu'}.json"
        path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    else:
        path = write_result("background_ranks", data)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
