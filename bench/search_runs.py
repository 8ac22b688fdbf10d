"""Every search strategy on the GPU, 3 seeds each, against the exhaustive recording of `bench/search.py`.

Run on a GPU machine from the repository root (the recordings in tests/data/search must be there):

    PYTHONPATH=src python3 bench/search_runs.py run --deadline 520 model:0 model:1 model:2 ...
    PYTHONPATH=src python3 bench/search_runs.py collect OUT_DIR...     # anywhere: merge the runs

A run tunes the demo's matmul at one recorded shape, from cold, as a user's first tuning of it:
one fresh process with an empty result store and an empty Triton cache, the tuned kernel made at
import (`bench/search_kernel.py`) and called once, on the default path (`kernelpick.autotune`,
forked compilers, isolated workers), with `KERNELPICK_SEARCH=<strategy>` and
`KERNELPICK_SEARCH_SEED=<seed>` (random and halving get `KERNELPICK_SEARCH_BUDGET=0.1`, see
BUDGETED; model and pattern stop by themselves). The call's wall time and its search's best-so-far curve (seconds, config, live time)
go to $OUT/search-run-<strategy>-<seed>-<M>x<N>x<K>.json, the tuning to the tuning log
$OUT/search-log-<strategy>-<seed>-<M>x<N>x<K>.jsonl.

`collect` judges each config found by the recorded exhaustive timings (the "true" times, so the
live timings' noise does not flatter a strategy), finds when each run first held a config within
0.98x of the true best, and compares that with a cold exhaustive tuning of the same shape. The
recording compiled the space once, at its first shape (the four shapes share every binary: M, N
and K are not constexprs and all are divisible by 16), so a cold exhaustive tuning of shape s is
derived from the first shape's compiling and s's timing (`cold_exhaustive_s`). The figures are merged into
bench/results/search-<device>.json under "strategies" and the logs into
bench/results/search-log-<device>.jsonl: the strategies found in the folders replace their
earlier runs there, the others' are kept. From the log

    kernelpick report --log bench/results/search-log-h100.jsonl --html docs/search-report-h100.html

draws every strategy's curve.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data" / "search"
#: Rough seconds one shape's run takes, so a call stops starting runs it cannot finish: model,
#: random and halving the slowest seen on the H100 and H200, rounded up; pattern (run on no GPU
#: yet) twice its replay on the cold H200 shape (16 % of 270 s).
ESTIMATE_S = {"model": 60, "random": 100, "pattern": 90, "halving": 30, "exhaustive": 420}
#: Strategies that stop only when the space is spent run with KERNELPICK_SEARCH_BUDGET=0.1: random,
#: and halving, which compiles every config of its first round (unbudgeted, the whole space: a cold
#: run would cost what exhaustive does, whose compiling took 378 of its 406 s on the H100).
BUDGETED = ("random", "halving")
TARGET = 0.98


def _recording(m: int, n: int, k: int, slug: str) -> dict[str, Any]:
    return dict(json.loads((DATA / f"gemm-{m}x{n}x{k}-{slug}.json").read_text()))


def one(strategy: str, seed: int, shape: tuple[int, int, int], out: Path) -> None:
    """One run (in this fresh process): `shape` tuned from cold, figures and log into `out`."""
    m, n, k = shape
    name = f"{strategy}-{seed}-{m}x{n}x{k}"
    work = Path(tempfile.mkdtemp(prefix="kernelpick-search-run-"))
    os.environ.update(
        KERNELPICK_CACHE_DIR=str(work / "store"),
        TRITON_CACHE_DIR=str(work / "triton"),
        KERNELPICK_SEARCH=strategy,
        KERNELPICK_SEARCH_SEED=str(seed),
        KERNELPICK_LOG=str(out / f"search-log-{name}.jsonl"),
    )
    if strategy in BUDGETED:
        os.environ["KERNELPICK_SEARCH_BUDGET"] = "0.1"
    sys.path.insert(0, str(HERE))
    import torch
    import triton
    from common import device_slug, environment
    from search_kernel import tuned_matmul  # makes the tuned kernel: the workers start

    from kernelpick.demo import matmul_arguments

    env = environment()
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    started = time.perf_counter()
    tuned_matmul[lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)](
        *matmul_arguments(a, b, c)
    )
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    torch.testing.assert_close(c, a @ b, atol=0.5, rtol=0.02)
    record = tuned_matmul.last_tuning
    assert record is not None and record.search is not None, "the tuning ran no search"
    trace = record.search
    statuses: dict[str, int] = {}
    for result in record.results.values():
        statuses[result.status] = statuses.get(result.status, 0) + 1
    data = {
        "strategy": strategy,
        "seed": seed,
        "environment": env,
        "device_slug": device_slug(env["device"]),
        "shape": {"M": m, "N": n, "K": k},
        "wall_s": wall,
        "phases": dict(record.phases),
        "picked": record.best.to_dict(),
        "statuses": statuses,
        "search_seconds": trace.seconds,
        "used": trace.used,
        "stopped": trace.stopped,
        "progress": [
            {"seconds": s, "config": e.config.to_dict(), "live_ms": e.result.cost_ms, "effort": e.effort}
            for s, e in trace.progress()
        ],
    }
    (out / f"search-run-{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    print(f"{name}: {trace.used} timed in {wall:.1f} s ({trace.stopped}; {statuses})", flush=True)


def run(runs: list[str], shapes: list[tuple[int, int, int]], deadline: float, out: Path) -> None:
    """Each `strategy:seed` at each shape in a fresh process, in order, while `deadline` seconds
    leave room for it."""
    started = time.perf_counter()
    for spec in runs:
        strategy, _, seed = spec.partition(":")
        for m, n, k in shapes:
            left = deadline - (time.perf_counter() - started)
            if left < ESTIMATE_S[strategy]:
                print(f"skipped {spec} {m}x{n}x{k}: {left:.0f} s left, a run takes ~{ESTIMATE_S[strategy]} s")
                continue
            shape = f"{m}x{n}x{k}"
            command = [sys.executable, __file__, "one", strategy, seed or "0", shape, "--out", str(out)]
            begun = time.perf_counter()
            try:
                done = subprocess.run(command, timeout=left, check=False)
                print(
                    f"{spec} {shape}: exit {done.returncode} in {time.perf_counter() - begun:.0f} s",
                    flush=True,
                )
            except subprocess.TimeoutExpired:
                print(f"{spec} {shape}: stopped at the deadline after {time.perf_counter() - begun:.0f} s")


def cold_exhaustive_s(recorded: list[dict[str, Any]]) -> dict[tuple[int, ...], float]:
    """Seconds a cold exhaustive tuning takes at each recorded shape (see the module's docstring).

    Where the first shape was timed in process, after its compiles (the H100 recording), a cold
    tuning of shape s is its compiling plus s's timing. Where it was timed in workers beside the
    compiles (its benchmark phase spans the compile phase: the H200 recording), the compiling
    bounds the wall time: another shape takes the first shape's wall time while its own timing
    is shorter than that compiling, else the compiling plus its timing.
    """
    first = recorded[0]
    phases = first["phases"]
    beside = phases["benchmark"] > first["wall_s"] - phases["compile"] + 1.0
    cold = {}
    for shape in recorded:
        timing = shape["phases"]["benchmark"]
        if shape is first:
            seconds = first["wall_s"]
        elif not beside:
            seconds = first["wall_s"] - phases["benchmark"] + timing
        elif timing < phases["compile"]:
            seconds = first["wall_s"]
        else:
            seconds = phases["compile"] + timing
        cold[tuple(shape["shape"].values())] = seconds
    return cold


def judge(run: dict[str, Any], true_ms: dict[str, float], exhaustive_s: float) -> dict[str, Any]:
    """A run's curve and pick judged by the recorded true times, against a cold exhaustive tuning."""
    from kernelpick.config import Config

    best = min(true_ms.values())
    curve = []
    for point in run["progress"]:
        ms = true_ms.get(Config.from_dict(point["config"]).digest)
        curve.append({**point, "true_ratio": None if ms is None else best / ms})
    reached = next((p["seconds"] for p in curve if (p["true_ratio"] or 0) >= TARGET), None)
    picked = true_ms.get(Config.from_dict(run["picked"]).digest)
    return {
        **run,
        "progress": curve,
        "true_best_ms": best,
        "picked_true_ratio": None if picked is None else best / picked,
        "reached_098_s": reached,
        "exhaustive_cold_s": exhaustive_s,
        "reached_098_fraction": None if reached is None else reached / exhaustive_s,
        "wall_fraction": run["wall_s"] / exhaustive_s,
    }


#: A logged candidate: its strategy, its log entry and how much slower than the true best the
#: recording timed it (None: the recording has no time for it).
Judged = tuple[str, dict[str, Any], float | None]


def judged_candidates(lines: list[str], truth: dict[tuple[int, ...], dict[str, float]]) -> list[Judged]:
    """Every candidate of the logged tunings, with its strategy and its true slowdown."""
    from kernelpick.config import Config

    judged = []
    for line in lines:
        entry = json.loads(line)
        times = truth[(entry["key"]["M"], entry["key"]["N"], entry["key"]["K"])]
        best = min(times.values())
        for candidate in entry["candidates"]:
            ms = times.get(Config.from_dict(candidate["description"]).digest)
            judged.append((entry["search"]["strategy"], candidate, None if ms is None else ms / best))
    return judged


def skipped_compiles(judged: list[Judged]) -> dict[str, Any]:
    """The compiles patience gave up in the logged tunings: how many (per strategy), their tiles,
    and how much slower than the true best the recording timed them."""
    strategies: Counter[str] = Counter()
    tiles: Counter[str] = Counter()
    slowdowns = []
    for strategy, candidate, slowdown in judged:
        if candidate["status"] != "skipped":
            continue
        described = candidate["description"]
        strategies[strategy] += 1
        tiles[
            f"{described['kwargs']['BLOCK_M']}x{described['kwargs']['BLOCK_N']}, {described['num_warps']} warps"
        ] += 1
        assert slowdown is not None, "a skipped config the recording did not time"
        slowdowns.append(slowdown)
    return {
        "count": sum(strategies.values()),
        "by_strategy": dict(strategies),
        "tiles": dict(tiles),
        "true_slowdown_range": [min(slowdowns), max(slowdowns)] if slowdowns else None,
    }


def compile_seconds(judged: list[Judged]) -> dict[str, Any]:
    """Per-config compile seconds of the logged tunings (their forked compilers', 16 at once): of
    the configs that compiled, and the longest of those within 1.1x of the true best; only a count
    of 0 when no tuning logged any (runs made before the logs had them)."""
    timed = [
        (c["compile_s"], slow)
        for _, c, slow in judged
        if c["status"] == "ok" and c.get("compile_s") is not None
    ]
    compiled = sorted(seconds for seconds, _ in timed)
    near = [seconds for seconds, slow in timed if slow is not None and slow <= 1.1]
    if not compiled:
        return {"configs": 0}
    return {
        "configs": len(compiled),
        "median_s": statistics.median(compiled),
        "p99_s": compiled[int(0.99 * (len(compiled) - 1))],
        "max_s": compiled[-1],
        "within_1_1x_of_best": {"configs": len(near), "max_s": max(near) if near else None},
    }


def batch_seconds(lines: list[str]) -> dict[str, Any]:
    """How long the logged searches' batches took (from one to the next), per strategy: those in
    which patience gave a compile up and the rest; and whether every batch over 8 s (patience's
    floor) held a tile of 128x128 elements or more with 2 warps, the compiles that floor is for."""

    def large_two_warp(config: dict[str, Any]) -> bool:
        return (
            config["kwargs"]["BLOCK_M"] * config["kwargs"]["BLOCK_N"] >= 128 * 128
            and config["num_warps"] == 2
        )

    found: dict[str, dict[str, list[float]]] = {}
    for line in lines:
        search = json.loads(line)["search"]
        batches: dict[float, list[dict[str, Any]]] = {}
        for evaluation in search["evaluations"]:
            batches.setdefault(evaluation["seconds_at"], []).append(evaluation)
        mine = found.setdefault(search["strategy"], {"skipped": [], "rest": [], "tiled": [], "untiled": []})
        ended = 0.0
        for at in sorted(batches):
            seconds, evaluations, ended = at - ended, batches[at], at
            gave_up = any(e["result"]["status"] == "skipped" for e in evaluations)
            mine["skipped" if gave_up else "rest"].append(seconds)
            mine["tiled" if any(large_two_warp(e["config"]) for e in evaluations) else "untiled"].append(
                seconds
            )
    return {
        strategy: {
            "batches": len(mine["skipped"]) + len(mine["rest"]),
            "with_a_compile_given_up_s": [min(mine["skipped"]), max(mine["skipped"])]
            if mine["skipped"]
            else None,
            "others_median_s": statistics.median(mine["rest"]) if mine["rest"] else None,
            "others_max_s": max(mine["rest"], default=None),
            "over_8_s": sum(s > 8 for s in mine["tiled"] + mine["untiled"]),
            "over_8_s_with_a_large_2_warp_tile": sum(s > 8 for s in mine["tiled"]),
            "without_a_large_2_warp_tile_max_s": max(mine["untiled"], default=None),
        }
        for strategy, mine in sorted(found.items())
    }


def collect(folders: list[Path], device: str | None = None) -> None:
    """Judge every run by the recorded true times and merge them into the results file and log
    (with no folders, those of `device` already there are judged again)."""
    sys.path.insert(0, str(HERE))
    from kernelpick.config import Config

    found = [json.loads(p.read_text()) for f in folders for p in sorted(f.glob("search-run-*.json"))]
    if not found and device is None:
        raise SystemExit(f"no search-run-*.json in {', '.join(map(str, folders))}, and no --device")
    slug = found[0]["device_slug"] if found else device
    results = HERE / "results" / f"search-{slug}.json"
    summary = json.loads(results.read_text())
    cold = cold_exhaustive_s(summary["exhaustive"])
    truth = {}
    for m, n, k in cold:
        rows = _recording(m, n, k, slug)["results"]
        truth[(m, n, k)] = {
            Config.from_dict(r["config"]).digest: r["median_ms"] for r in rows if r["status"] == "ok"
        }
    # The strategies found here replace their earlier runs; the file's other strategies stay.
    fresh = {data["strategy"] for data in found}
    kept = [r for r in summary.get("strategies", {}).get("runs", []) if r["strategy"] not in fresh]
    runs = [
        judge(data, truth[tuple(data["shape"].values())], cold[tuple(data["shape"].values())])
        for data in found
    ]
    runs = kept + runs
    log = HERE / "results" / f"search-log-{slug}.jsonl"
    earlier = log.read_text().splitlines(keepends=True) if log.exists() else []
    lines = [line for line in earlier if json.loads(line)["search"]["strategy"] not in fresh]
    lines += [p.read_text() for f in folders for p in sorted(f.glob("search-log-*.jsonl"))]
    table = {}
    for strategy in sorted({r["strategy"] for r in runs}):
        done = [r for r in runs if r["strategy"] == strategy]
        fractions = [r["reached_098_fraction"] for r in done]
        table[strategy] = {
            "runs": len(done),
            "seeds": sorted({r["seed"] for r in done}),
            "shapes": sorted({"{M}x{N}x{K}".format(**r["shape"]) for r in done}),
            "worst_picked_true_ratio": min(r["picked_true_ratio"] or 0 for r in done),
            "reached_098_every_run": all(f is not None for f in fractions),
            "median_reached_098_fraction": None if None in fractions else statistics.median(fractions),
            "worst_reached_098_fraction": None if None in fractions else max(fractions),
            "median_wall_fraction": statistics.median(r["wall_fraction"] for r in done),
            "worst_wall_fraction": max(r["wall_fraction"] for r in done),
        }
        print(f"{strategy}: {json.dumps(table[strategy])}")
    judged = judged_candidates(lines, truth)
    summary["strategies"] = {
        "target": TARGET,
        "exhaustive_cold_s": {"{}x{}x{}".format(*shape): seconds for shape, seconds in cold.items()},
        "summary": table,
        "skipped_compiles": skipped_compiles(judged),
        "compile_seconds": compile_seconds(judged),
        "batch_seconds": batch_seconds(lines),
        "runs": runs,
    }
    print(f"skipped compiles: {json.dumps(summary['strategies']['skipped_compiles'])}")
    print(f"compile seconds: {json.dumps(summary['strategies']['compile_seconds'])}")
    print(f"batch seconds: {json.dumps(summary['strategies']['batch_seconds'])}")
    results.write_text(json.dumps(summary, indent=1) + "\n")
    log.write_text("".join(lines))
    print(f"wrote {results} and {log}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    start = modes.add_parser("run", help="runs, each in a fresh process, until the deadline")
    start.add_argument("runs", nargs="+", metavar="STRATEGY:SEED")
    start.add_argument("--deadline", type=float, default=560.0, help="seconds this call may take")
    start.add_argument(
        "--shapes", default="", metavar="MxNxK,...", help="in this order (default: all recorded)"
    )
    single = modes.add_parser("one", help="one run in this process")
    single.add_argument("strategy")
    single.add_argument("seed", type=int)
    single.add_argument("shape", help="MxNxK")
    single.add_argument("--out", type=Path, required=True)
    merge = modes.add_parser("collect", help="merge runs fetched from the GPU machine")
    merge.add_argument("folders", nargs="*", type=Path)
    merge.add_argument("--device", help="with no folders: judge this device's runs again (h100, h200)")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT") or ".")
    if args.mode == "run":
        sys.path.insert(0, str(HERE))
        from search import SHAPES

        chosen = [tuple(int(size) for size in text.split("x")) for text in args.shapes.split(",") if text]
        run(args.runs, chosen or SHAPES, args.deadline, out)  # type: ignore[arg-type]
    elif args.mode == "one":
        m, n, k = (int(size) for size in args.shape.split("x"))
        one(args.strategy, args.seed, (m, n, k), args.out)
    else:
        collect(args.folders, args.device)
