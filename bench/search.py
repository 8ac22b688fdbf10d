"""Search strategies on a GEMM space too large to time casually: record it exhaustively on a GPU.

Run on a GPU machine from the repository root:

    PYTHONPATH=src python3 bench/search.py record     # about 8 minutes on an H100
    PYTHONPATH=src python3 bench/search.py replay     # on any machine: every strategy on the recordings

`record` tunes the demo's matmul kernel (`kernelpick.demo.matmul_kernel`, fp16, A (M, K) @ B (K, N))
over an exhaustive space on the default path (`kernelpick.autotune`, parallel compiles, isolated
workers: the tuned kernel is `bench/search_kernel.py`'s, bound at module level; fresh
KERNELPICK_CACHE_DIR and TRITON_CACHE_DIR) at 4 shapes of the GEMM suite, in one process. (The
H100 recording of 2026-11-25 was made before the kernel was bound at module level: its timing ran
in the tuning process.)

    BLOCK_M, BLOCK_N, BLOCK_K in {16, 32, 64, 128, 256}, num_stages in {1..5}, num_warps in {2, 4, 8}

1,875 configs (Inductor's exhaustive GEMM space has the same dimensions), of which those needing
more shared memory than the device has are left out before compiling: (BLOCK_M*BLOCK_K +
BLOCK_K*BLOCK_N) * num_stages * 2 bytes. Every config's result goes to
tests/data/search/gemm-<M>x<N>x<K>-<device>.json (replay data: strategies are scored on it in CI)
and the run's figures to bench/results/search-<device>.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data" / "search"
SHAPES = [(16, 4096, 4096), (128, 6144, 4096), (2048, 4096, 4096), (128, 4096, 14336)]
BLOCKS = (16, 32, 64, 128, 256)
STAGES = (1, 2, 3, 4, 5)
WARPS = (2, 4, 8)


def space(shared_memory_limit: int) -> tuple[list[Any], int]:
    """The exhaustive space's configs whose fp16 tiles fit the device's shared memory (the default
    GEMM estimate of `kernelpick.Space`), and how many the product had."""
    from kernelpick.config import Config
    from kernelpick.search.space import gemm_shared_memory

    product = list(itertools.product(BLOCKS, BLOCKS, BLOCKS, STAGES, WARPS))
    configs = [
        Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for m, n, k, s, w in product
        if gemm_shared_memory({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_stages": s})
        <= shared_memory_limit
    ]
    return configs, len(product)


def record() -> None:
    work = Path(tempfile.mkdtemp(prefix="kernelpick-search-"))
    os.environ["KERNELPICK_CACHE_DIR"] = str(work / "store")
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton")
    sys.path.insert(0, str(HERE))
    import torch
    import triton
    from common import device_slug, environment, write_result
    from search_kernel import tuned_matmul as tuned  # bound at module level: timed in workers

    from kernelpick.demo import matmul_arguments

    props = torch.cuda.get_device_properties(0)
    limit = int(getattr(props, "shared_memory_per_block_optin", 0)) or 232448
    configs, product = space(limit)
    print(f"{len(configs)} of {product} configs fit {limit} bytes of shared memory", flush=True)
    env = environment()
    slug = device_slug(env["device"])
    DATA.mkdir(parents=True, exist_ok=True)
    shapes = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        started = time.perf_counter()
        tuned[lambda meta, m=m, n=n: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)](
            *matmul_arguments(a, b, c)
        )
        torch.cuda.synchronize()
        wall = time.perf_counter() - started
        record = tuned.last_tuning
        assert record is not None
        rows = [
            {
                "config": config.to_dict(),
                "status": result.status,
                "median_ms": result.timing.median_ms if result.timing else None,
                "spread": result.timing.spread if result.timing else None,
                "runs": result.timing.runs if result.timing else 0,
                "message": result.message[:200],
                **({} if result.compile_s is None else {"compile_s": result.compile_s}),
            }
            for config, result in record.results.items()
        ]
        ok = [r for r in rows if r["status"] == "ok"]
        best = min(ok, key=lambda r: r["median_ms"])
        torch_ms = triton.testing.do_bench(lambda a=a, b=b: torch.mm(a, b), rep=200)
        summary = {
            "shape": {"M": m, "N": n, "K": k},
            "configs": len(rows),
            "ok": len(ok),
            "failed": len(rows) - len(ok),
            "wall_s": wall,
            "phases": dict(record.phases),
            "best": best,
            "torch_mm_do_bench_ms": torch_ms,
        }
        shapes.append(summary)
        recorded = {
            "format": "kernelpick-recorded-space",
            "version": 1,
            "device": env["device"],
            "kernel": "kernelpick.demo.matmul_kernel",
            "dtype": "float16",
            "shape": summary["shape"],
            "environment": env,
            "wall_s": wall,
            "phases": dict(record.phases),
            "cpu_count": os.cpu_count(),
            "results": rows,
        }
        path = DATA / f"gemm-{m}x{n}x{k}-{slug}.json"
        text = json.dumps(recorded, separators=(",", ":"))
        path.write_text(text + "\n")
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], path.name).write_text(text + "\n")
        # After every shape, so a run cut short keeps the shapes it finished.
        write_result(
            "search",
            {
                "environment": env,
                "space": {"product": product, "fit": len(configs), "shared_memory_limit": limit},
                "exhaustive": shapes,
            },
        )
        print(
            f"{m}x{n}x{k}: {len(ok)} of {len(rows)} ok, best {best['median_ms']:.4f} ms "
            f"(torch.mm {torch_ms:.4f} ms) in {wall:.1f} s; phases "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in record.phases.items()),
            flush=True,
        )


def replay(log_dir: Path) -> None:
    """Every strategy, seeds 0-2, replayed on every recorded space, a device at a time: scores into
    bench/results/search-replay-<device>.json, each search logged (as a tuning) to
    `log_dir`/search-replay-<device>.jsonl."""
    sys.path.insert(0, str(HERE))
    import torch  # noqa: F401  (kernelpick's records need it loaded)

    from kernelpick import settings
    from kernelpick.device import DeviceInfo
    from kernelpick.engine.record import TuningRecord
    from kernelpick.reports import log_tuning
    from kernelpick.search import Budget, strategy_names
    from kernelpick.search.replay import RecordedSpace, score

    slugs = sorted({path.stem.rsplit("-", 1)[1] for path in DATA.glob("gemm-*.json")})
    for slug in slugs:
        log = log_dir / f"search-replay-{slug}.jsonl"
        log.unlink(missing_ok=True)
        scores: dict[str, Any] = {}
        device_name = ""
        for path in sorted(DATA.glob(f"gemm-*-{slug}.json")):
            data = json.loads(path.read_text())
            recorded, env = RecordedSpace.from_dict(data), data["environment"]
            device_name = recorded.device
            device = replace(
                DeviceInfo.recorded(device_name, env["capability"]),
                l2_bytes=env["l2_bytes"],
                multiprocessors=env["multiprocessors"],
            )
            shape = dict(recorded.shape)
            key = (
                shape["M"],
                shape["N"],
                shape["K"],
                "torch.float16",
                "torch.float16",
                "torch.float16",
                "cuda",
            )
            scores[path.stem] = {}
            for name in strategy_names():
                budget = Budget(max_evaluations=len(recorded) // 10) if name == "random" else None
                scored = score(name, recorded, budget)
                scores[path.stem][name] = scored.to_dict()
                for run in scored.runs if name != "exhaustive" else scored.runs[:1]:  # exhaustive: one is all
                    trace = run.trace
                    assert trace is not None and trace.best is not None
                    record = TuningRecord.of_configs(
                        "matmul_kernel", key, device, trace.results(), trace.best.config, trace.seconds, False,
                        phases={"simulated": trace.seconds}, note="replayed from a recording",
                        searches={"matmul_kernel": trace}, key_names=("M", "N", "K"),
                    )  # fmt: skip
                    with settings.override(log_path=log):
                        log_tuning(record)
                summary = scores[path.stem][name]
                print(
                    f"{path.stem} {name:10s} worst {summary['worst_ratio']:.3f} of the best, "
                    f"{summary['mean_evaluations']:.0f} timings, "
                    f"{summary['time_fraction']:.1%} of exhaustive's time",
                    flush=True,
                )
        data = {"replayed_from": "tests/data/search", "device": device_name, "scores": scores}
        out = ROOT / "bench" / "results" / f"search-replay-{slug}.json"
        out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {out} and the log {log}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["record", "replay"])
    parser.add_argument(
        "--log-dir", type=Path, default=Path("."), help="replay: where the tuning logs go (one per device)"
    )
    args = parser.parse_args()
    if args.mode == "record":
        record()
    else:
        replay(args.log_dir)
