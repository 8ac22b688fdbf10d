"""Would more tiles help `kernelpick.ops.mm` or `ops.scaled_mm`? A config space with extra tiles, timed.

The tiles given with `--tiles` are added to the op's small-M space (`gemm_configs.SMALL_M` or
`scaled_mm_configs.SMALL_M`, offered for M up to 128) in this process; then, for each shape (M from
`--m` by the six (N, K) pairs of the GEMM suite, `x @ W.T`, bf16 for `mm`, fp8 e4m3 with per-tensor
scales and a bf16 output for `scaled_mm`, made as the suites make them), with an empty cache:

- the selection on the default path (its pick, tuning seconds, each choice's cost);
- the `--top` cheapest choices of the selection and the reference (`torch.mm`, `torch._scaled_mm`)
  timed again with Inductor's profiler (`do_bench_using_profiling`: kernel time from CUPTI), and
  whether each is one of the added tiles;
- the call through `ops` against the reference called directly, `triton.testing.do_bench` medians
  in `--rounds` interleaved rounds (L2 flushed), as the suites time.

    PYTHONPATH=src:bench python3 bench/tile_sweep.py --op scaled_mm --tiles "64,64,256,6,4;64,64,128,8,4"

Tiles are BLOCK_M,BLOCK_N,BLOCK_K,num_stages,num_warps; clamped to the problem and left out where
they do not fit in shared memory, as every tile of the space is. Results:
bench/results/tile_sweep-<op>-<device>.json. `--tiny` runs on the CPU (Triton's interpreter, tiny
shapes, fp32 for `mm`, the tiles added to the interpreter's space, timed with time.perf_counter):
its figures mean nothing (tests/bench_scripts/test_tile_sweep.py runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, device_slug, environment, require_kernelpick
from gemm_suite import NK_PAIRS
from stability import fp8_operands, gemm_operands

Tile = tuple[int, int, int, int, int]
OPS = ("mm", "scaled_mm")
#: `--tiny`: shapes for Triton's interpreter (K of 64 or more: fp8's least BLOCK_K is 32).
TINY_SHAPES = ((16, 32, 64), (32, 48, 64))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", choices=OPS, default="mm")
    parser.add_argument("--tiles", default="", help='added tiles: "BM,BN,BK,stages,warps;..."')
    parser.add_argument("--m", default="128,16", help="comma-separated M values")
    parser.add_argument("--top", type=int, default=6, help="the selection's cheapest choices re-timed")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved do_bench rounds per shape")
    parser.add_argument("--tiny", action="store_true", help="a smoke test on the CPU")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the results file")
    return parser.parse_args()


def parse_tiles(text: str) -> list[Tile]:
    """`--tiles`' "BM,BN,BK,stages,warps;..." as tiles; stops, naming the part, on anything else."""
    tiles = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        try:
            values = tuple(int(v) for v in part.split(","))
        except ValueError:
            values = ()
        if len(values) != 5 or min(values) <= 0:
            raise SystemExit(
                f"--tiles: {part!r} is not five positive integers BLOCK_M,BLOCK_N,BLOCK_K,num_stages,num_warps"
            )
        tiles.append(values)
    return tiles  # type: ignore[return-value]


def space_module(op: str) -> Any:
    from kernelpick.ops import gemm_configs, scaled_mm_configs

    return gemm_configs if op == "mm" else scaled_mm_configs


def add_tiles(op: str, tiles: list[Tile], interpreted: bool) -> tuple[Tile, ...]:
    """Offer `tiles` besides the op's own small-M (or, on the CPU, interpreter) tiles; the space's
    own tiles are returned."""
    module = space_module(op)
    field = "INTERPRETED" if interpreted else "SMALL_M"
    own: tuple[Tile, ...] = getattr(module, field)
    setattr(module, field, (*own, *tiles))
    return own


def new_tiles(op: str, shape: tuple[int, int, int], tiles: list[Tile], own: tuple[Tile, ...]) -> set[Tile]:
    """The added tiles as the space offers them at `shape` (clamped to it, as its own are), less
    those that clamp to one of its own."""
    clamp, problem = space_module(op)._clamp, types.SimpleNamespace(m=shape[0], n=shape[1], k=shape[2])
    return {clamp(t, problem) for t in tiles} - {clamp(t, problem) for t in own}


def tiled_template(op: str) -> str:
    """The name of the op's tiled template, whose configs the small-M space gives (not the skinny or
    persistent ones)."""
    import torch

    from kernelpick.ops.gemm_templates import GEMM
    from kernelpick.ops.scaled_mm_templates import scaled_gemm

    return GEMM.name if op == "mm" else scaled_gemm(torch.bfloat16).name


def tile_of(op: str, choice: dict[str, Any]) -> Tile | None:
    """A tiled template choice's tile, from its description; None for other choices."""
    if choice.get("template") != tiled_template(op):
        return None
    config = choice["config"]
    kwargs = config["kwargs"]
    blocks = (kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs["BLOCK_K"])
    return (*blocks, config["num_stages"], config["num_warps"])


def timers(tiny: bool) -> tuple[Callable[[Callable[[], Any]], float], Callable[[Callable[[], Any]], float]]:
    """(kernel time, do_bench-like time) in ms: Inductor's profiler and do_bench on a GPU, wall
    clock medians on the CPU."""
    if tiny:

        def wall(fn: Callable[[], Any]) -> float:
            fn()
            samples = []
            for _ in range(3):
                started = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - started) * 1e3)
            return statistics.median(samples)

        return wall, wall
    import triton.testing
    from torch._inductor.utils import do_bench_using_profiling

    def bench(fn: Callable[[], Any]) -> float:
        return float(triton.testing.do_bench(fn, warmup=25, rep=50, return_mode="median"))

    return (lambda fn: float(do_bench_using_profiling(fn))), bench


def sweep_shape(
    op: str, shape: tuple[int, int, int], added: set[Tile], args: argparse.Namespace
) -> dict[str, Any]:
    import torch

    import kernelpick
    from kernelpick.ops.scaled_mm import selector_name

    # As the suites make them (seeded by the shape): bf16, or fp8 with per-tensor scales; float32 and
    # fp8 on the CPU.
    inputs = gemm_operands(*shape) if op == "mm" else fp8_operands(*shape)
    name = "mm" if op == "mm" else selector_name(torch.bfloat16)
    selector = kernelpick.ops.selector(name)
    direct: Callable[[], Any]
    if op == "mm":
        direct = lambda: torch.mm(*inputs)  # noqa: E731
        through = lambda: kernelpick.ops.mm(*inputs)  # noqa: E731
    else:
        direct = lambda: torch._scaled_mm(*inputs, out_dtype=torch.bfloat16)  # noqa: E731
        through = lambda: kernelpick.ops.scaled_mm(*inputs, out_dtype=torch.bfloat16)  # noqa: E731
    started = time.perf_counter()
    through()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    tuning_s = time.perf_counter() - started
    record = selector.last_selection
    assert record is not None
    ranked = sorted((r for r in record.candidates if r.result.ok), key=lambda r: r.result.cost_ms)
    chosen = [r.name for r in ranked[: args.top]]
    # What the selection checks outputs against and keeps where nothing beats it: the extern choice.
    digest = selector.reference_digest(record.signature)
    reference = next(r.name for r in record.candidates if r.digest == digest)
    if reference not in chosen:
        chosen.append(reference)
    choices = {c.name: c for c in selector.choices_for(*inputs)}
    kernel_ms, bench_ms = timers(args.tiny)
    rows = []
    for row in (r for r in ranked if r.name in chosen):
        description = choices[row.name].description()
        tile = tile_of(op, description)
        fn = choices[row.name].callable_for(record.signature)
        rows.append(
            {
                "choice": row.name,
                "tile": tile,
                "added": tile in added,
                "selected_ms": row.result.cost_ms,
                "profiler_ms": kernel_ms(lambda fn=fn: fn(*inputs)),
            }
        )
    rounds: dict[str, list[float]] = {"reference": [], "kernelpick": []}
    for index in range(args.rounds):
        order = ("reference", "kernelpick") if index % 2 == 0 else ("kernelpick", "reference")
        for who in order:
            rounds[who].append(bench_ms(direct if who == "reference" else through))
    medians = {who: statistics.median(times) for who, times in rounds.items()}
    reference_ms = next(r["profiler_ms"] for r in rows if r["choice"] == reference)
    for row in rows:
        row["vs_reference"] = reference_ms / row["profiler_ms"]
    return {
        "shape": list(shape),
        "reference": reference,
        "pick": record.best,
        "pick_added": any(r["added"] for r in rows if r["choice"] == record.best),
        "tuning_s": tuning_s,
        "choices": len(record.results),
        "rows": rows,
        "do_bench_rounds_ms": rounds,
        "do_bench_ms": medians,
        "ops_vs_reference": medians["reference"] / medians["kernelpick"],
    }


def main() -> int:
    args = parse()
    # Before kernelpick is imported: it reads its settings once, at import.
    os.environ["KERNELPICK_CACHE_DIR"] = tempfile.mkdtemp(prefix="tile-sweep-")
    require_kernelpick()
    tiles = parse_tiles(args.tiles)
    own = add_tiles(args.op, tiles, args.tiny)
    if args.tiny:
        shapes = list(TINY_SHAPES)
    else:
        shapes = [(int(m), n, k) for m in args.m.split(",") for n, k in NK_PAIRS]
    results = []
    for shape in shapes:
        entry = sweep_shape(args.op, shape, new_tiles(args.op, shape, tiles, own), args)
        results.append(entry)
        best = min(entry["rows"], key=lambda r: r["profiler_ms"])
        print(
            f"[{'x'.join(map(str, shape))}] pick {entry['pick'][:60]}{' (added)' if entry['pick_added'] else ''}"
            f" in {entry['tuning_s']:.1f} s; fastest re-timed: {best['choice'][:60]} "
            f"{best['vs_reference']:.3f}x {entry['reference']}; through ops {entry['ops_vs_reference']:.3f}x",
            flush=True,
        )
    report = {
        "environment": environment(),
        "op": args.op,
        "tiles_added": tiles,
        "tiny": args.tiny,
        "shapes": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"tile_sweep-{args.op}-{device_slug(report['environment']['device'])}.json"
    text = json.dumps(report, indent=2, default=str) + "\n"
    path.write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], path.name).write_text(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
