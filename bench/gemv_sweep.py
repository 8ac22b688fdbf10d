# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""GEMV sweep: the skinny template's decode form over a wide grid of configs, against cuBLAS and Inductor.

What the decode configs of `kernelpick.ops.mm` (gemm_configs.GEMV_ALONG_K) should be is measured here,
not guessed: for each decode shape (M = 1 or 4, bf16 `x @ W.T`), every config of the grid below (rows
of W per program, BLOCK_K, warps, stages, split-K) is compiled and timed by a Selector (one exhaustive selection, torch.mm its reference), then the 16
fastest, the current space's pick, torch.mm and Inductor's max-autotune kernel are timed again with
`triton.testing.do_bench` in interleaved rounds. Inductor's generated code for the shape is kept, so
that its kernel can be read, with the config its coordinate descent ended at. --narrow sweeps a
smaller grid around the wide grid's M = 1 leaders (up to 8192 along K and 32 warps) into
gemv_sweep-narrow-<device>.json.

The committed H100 file's run (2026-11-26) also varied two knobs the template had then: EVICT (B read
with eviction_policy="evict_first", A with "evict_last": in every leader; the fastest config without
it ran 4-12 % slower, so the GEMV form now always does it) and A_ROW (a row of A read as a BLOCK_K x 1
column instead of a tile of B's shape: no difference beyond 1.4 %, dropped).

Writes bench/results/gemv_sweep-<device>.json (date, versions, every config's time, the re-timed
leaders as GB/s of streaming W once and % of the HBM peak).

Usage: python bench/gemv_sweep.py [--shapes 1x4096x4096,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPES = ("1x4096x4096", "1x4096x14336", "1x28672x4096", "4x4096x4096")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated MxNxK")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved do_bench rounds of the leaders")
    parser.add_argument("--leaders", type=int, default=16, help="how many of the sweep's fastest to re-time")
    parser.add_argument("--narrow", action="store_true", help="the narrow grid around the M = 1 leaders")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args()


#: The grid's axes: rows of W a program, BLOCK_K, warps, stages, split-K.
WIDE = ((1, 2, 4, 8, 16, 32), (256, 512, 1024, 2048, 4096), (2, 4, 8, 16), (1, 3), (1, 2, 4))
#: ... around the wide grid's leaders at M = 1 (few rows, long along K, one stage), with 32 warps
NARROW = ((1, 2, 4, 8), (1024, 2048, 4096, 8192), (4, 8, 16, 32), (1,), (1, 2))


def grid(m: int, n: int, k: int, axes: tuple[tuple[int, ...], ...] = WIDE) -> list[Any]:
    """Every GEMV config of `axes` worth compiling: 8 to 64 float32 sums per thread per unrolled row."""
    from kernelpick import Config

    configs = []
    for block_n, block_k, warps, stages, split in itertools.product(*axes):
        per_thread = m * block_n * block_k / (32 * warps)
        programs = -(-n // block_n) * split
        if (
            not 8 <= per_thread <= 64
            or 2 * block_k * split > k
            or block_n > n
            or (split > 1 and programs > 1024)
        ):
            continue
        kwargs = {"BLOCK_M": m, "BLOCK_N": block_n, "BLOCK_K": block_k, "SPLIT_K": split}
        configs.append(Config(kwargs, num_warps=warps, num_stages=stages))
    return configs


class _Messages(logging.Handler):
    """Keeps the messages of a logger that contain `text` (Inductor's coordinate descent says which
    config its reduction ended with only in a debug message)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.text in message:
            self.messages.append(message)


def main() -> int:
    args = parse()
    os.environ["KERNELPICK_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelpick-gemv-")
    import torch
    import triton
    from triton.testing import do_bench

    import kernelpick
    from kernelpick import Config, Selector, extern, template
    from kernelpick.device import describe, device_peaks
    from kernelpick.engine.signature import Signature
    from kernelpick.ops import gemm_configs
    from kernelpick.ops.gemm import _constants
    from kernelpick.ops.gemm_templates import SKINNY_GEMM
    from kernelpick.reports.bandwidth import memory_bandwidth

    peaks = device_peaks(torch.cuda.get_device_name())
    hbm = peaks.memory_gbps if peaks is not None else None
    copy_gbs = memory_bandwidth(describe(torch.device("cuda"))).memory_gbps
    label = torch.cuda.get_device_name().split()[1].lower()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(),
        "versions": {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "kernelpick": kernelpick.__version__,
            "python": platform.python_version(),
        },
        "hbm_peak_gbs": hbm,
        "copy_gbs": copy_gbs,
        "shapes": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gemv_sweep{'-narrow' if args.narrow else ''}-{label}.json"
    for text in args.shapes.split(","):
        m, n, k = (int(v) for v in text.split("x"))
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
        configs = grid(m, n, k, NARROW if args.narrow else WIDE)
        current = gemm_configs.decode_configs(0, 1)(Signature.of((a, b), {}))
        print(f"[{text}] {len(configs)} configs, the current space's {len(current)} among them", flush=True)
        swept = [*configs, *current]
        selector = Selector(
            f"gemv_sweep_{text}",
            [
                extern(torch.mm, name="torch.mm"),
                template(
                    SKINNY_GEMM,
                    configs=lambda _s, swept=swept: swept,
                    constants=_constants(False),
                    name="gemv",
                ),
            ],
            search="exhaustive",
        )
        started = time.perf_counter()
        selector(a, b)
        tuning_s = time.perf_counter() - started
        record = selector.last_selection
        assert record is not None
        timed = sorted(
            ((r.name, r.result.timing.median_ms) for r in record.candidates if r.result.timing is not None),
            key=lambda item: item[1],
        )
        current_names = {f"gemv {Config.of(c)}" for c in current}
        leaders = [name for name, _ in timed[: args.leaders]]
        best_current = next((name for name, _ in timed if name in current_names), None)
        if best_current is not None and best_current not in leaders:
            leaders.append(best_current)
        signature = Signature.of((a, b), {})
        space = selector.spaces[1]
        by_name = {choice.name: choice for choice in space.choices_for(signature)}
        calls = {name: by_name[name].callable_for(signature) for name in leaders if name in by_name}
        calls["torch.mm"] = torch.mm
        compiled = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs")
        from torch._inductor.utils import run_and_get_code

        descent = _Messages("Improve from")
        tuner_log = logging.getLogger("torch._inductor.runtime.coordinate_descent_tuner")
        tuner_log.addHandler(descent)
        tuner_log.setLevel(logging.DEBUG)
        try:
            _, inductor_code = run_and_get_code(compiled, a, b)
        finally:
            tuner_log.removeHandler(descent)
        calls["inductor"] = compiled
        rounds: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                rounds[name].append(do_bench(lambda call=call, a=a, b=b: call(a, b), warmup=25, rep=100))
        medians = {name: statistics.median(values) for name, values in rounds.items()}
        weight_bytes = n * k * 2
        entry = {
            "m": m,
            "n": n,
            "k": k,
            "configs": len(swept),
            "tuning_s": tuning_s,
            "pick": record.best,
            "sweep_ms": dict(timed),
            "failed": {r.name: r.result.message[:200] for r in record.candidates if r.result.timing is None},
            "retimed_ms": rounds,
            "median_ms": medians,
            "gbs": {name: weight_bytes / (ms * 1e-3) / 1e9 for name, ms in medians.items()},
            "best_current": best_current,
            "inductor_code": inductor_code,
            "inductor_coordinate_descent": descent.messages,
        }
        results["shapes"].append(entry)
        path.write_text(json.dumps(results, indent=1))
        for name, ms in sorted(medians.items(), key=lambda item: item[1]):
            gbs = entry["gbs"][name]
            share = f"{100 * gbs / hbm:5.1f}%" if hbm else "  ?  "
            mark = " (current space)" if name == best_current else ""
            print(f"  {ms * 1000:8.2f} us {gbs:7.0f} GB/s {share}  {name}{mark}", flush=True)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
