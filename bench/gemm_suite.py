"""GEMM suite: `kernelpick.ops.mm` against cuBLAS (`torch.mm`) and Inductor's max-autotune, on Llama shapes.

Run on a GPU machine from the repository root (jinja2, rich, numpy and, for the plot, matplotlib are
needed besides torch and triton; platformdirs is not, since the script sets the cache directories):

    PYTHONPATH=src python3 bench/gemm_suite.py --decode        # M = 1, 4 and 16: 18 decode shapes
    PYTHONPATH=src python3 bench/gemm_suite.py --m 16,128      # 12 shapes, about 4-6 minutes
    PYTHONPATH=src python3 bench/gemm_suite.py --m 2048        # each run adds to the same results file
    PYTHONPATH=src python3 bench/gemm_suite.py --m 8192        # the largest shapes, about 5-8 minutes

Every shape is bf16 `x @ W.T` as in `nn.Linear` (`--layout nn` for a row-major B): M in
{1, 4, 16, 128, 2048, 8192} by six (N, K) pairs of Llama-3 8B and 70B projections. For each shape it
measures, with empty caches (fresh KERNELPICK_CACHE_DIR, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR):

- tuning time: kernelpick's first call, and Inductor's first call of `torch.compile(mode=
  "max-autotune-no-cudagraphs")` (compile and autotune);
- kernel time: `triton.testing.do_bench` medians (L2 flushed), in interleaved rounds; cuBLAS is timed
  twice per round (`torch` and `torch_again`, the same call), and the two figures' disagreement is the
  suite's own noise on that shape: a pick is judged against the 0.99 target only where it is < 1 %;
- per-call time of back-to-back calls (launch overhead included, no flush);
- the fused epilogues: `kernelpick.ops.addmm(bias, x, W.T, activation=...)` for gelu and relu against
  the activation applied to `torch.addmm(...)` (`--epilogue-only` measures these alone, into
  gemm_epilogue-<device>.json);
- once, the dispatch overhead: `kernelpick.ops.mm` against calling its chosen implementation directly;
- at decode sizes (M <= 16), where the product is a read of W: each implementation's share of the HBM
  bandwidth that streaming W once would take (N*K*2 bytes / time), against the device's datasheet
  peak (`kernelpick.device.device_peaks`) and against the copy bandwidth measured on it
  (`kernelpick.reports.bandwidth.memory_bandwidth`, kept in the cache dir).

Results go to bench/results/gemm_suite-<device>.json (date, versions, raw figures, the targets),
merged with earlier runs of the same device, and a plot to gemm_suite-<device>.png. The table of
all shapes in the file is printed last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

M_VALUES = (1, 4, 16, 128, 2048, 8192)
#: M of decode steps: the product reads W once (kernelpick offers its skinny template up to 16 rows).
DECODE_M = (1, 4, 16)
#: (N, K) of Llama-3 projections: 8B qkv, o, gate+up, down; 70B qkv, down.
NK_PAIRS = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (10240, 8192), (8192, 28672))
#: Indices 0-23 are the shapes of earlier runs (M = 16, 128, 2048, 8192), 24-35 the ones added with
#: decode sizes (M = 1, 4), so that `--shapes` keeps meaning what it meant.
SHAPES = [(m, n, k) for m in (16, 128, 2048, 8192) for n, k in NK_PAIRS] + [
    (m, n, k) for m in (1, 4) for n, k in NK_PAIRS
]
#: Shapes where two timings of the same cuBLAS call differ by this much or more are too noisy to judge
#: a pick against the 0.99 target.
NOISE_LIMIT = 0.01
TARGETS = {
    "pick_vs_best_min": 0.99,
    "geomean_vs_cublas": 1.05,  # issue 24 (1.02 before it)
    "fused_vs_unfused_geomean": 1.1,
    "dispatch_us_max": 5.0,
    "decode_hbm_percent_min": 75.0,  # of the datasheet peak, streaming W once (issue 24)
}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", default=",".join(map(str, M_VALUES)), help="comma-separated M values to run")
    parser.add_argument(
        "--decode", action="store_true", help=f"the decode sizes only: --m {','.join(map(str, DECODE_M))}"
    )
    parser.add_argument(
        "--shapes",
        default="",
        help="comma-separated indices into the 36 shapes (0-23: M = 16, 128, 2048, 8192; 24-35: M = 1, 4)",
    )
    parser.add_argument(
        "--layout", choices=("nt", "nn"), default="nt", help="nt: B = W.T (nn.Linear); nn: B row-major"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per shape")
    parser.add_argument("--rep-ms", type=int, default=50, help="do_bench rep per round, in ms")
    parser.add_argument("--skip-inductor", action="store_true", help="leave torch.compile out")
    parser.add_argument(
        "--no-epilogue", action="store_true", help="leave the fused addmm+activation comparisons out"
    )
    parser.add_argument(
        "--activations", default="gelu,relu", help="comma-separated activations of the fused comparisons"
    )
    parser.add_argument(
        "--epilogue-only",
        action="store_true",
        help="only the fused comparisons (no mm, Inductor or dispatch), into gemm_epilogue-<device>.json",
    )
    parser.add_argument(
        "--warm-caches", action="store_true", help="keep existing caches (tuning times then mean little)"
    )
    parser.add_argument("--fresh", action="store_true", help="start a new results file instead of merging")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args()


def fresh_caches(args: argparse.Namespace) -> dict[str, str]:
    """Point every compiler cache at a new directory (before torch is imported), so tuning starts cold."""
    if args.warm_caches:
        os.environ.setdefault("KERNELPICK_CACHE_DIR", str(Path(tempfile.gettempdir()) / "kernelpick-bench"))
        return {}
    root = Path(tempfile.mkdtemp(prefix="gemm-suite-"))
    dirs = {
        "KERNELPICK_CACHE_DIR": str(root / "kernelpick"),
        "TRITON_CACHE_DIR": str(root / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
    }
    os.environ.update(dirs)
    return dirs


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import triton
        import triton.testing

        import kernelpick
        import kernelpick.ops  # as a program imports what it uses: the workers start here

        self.args, self.torch, self.triton, self.kernelpick = args, torch, triton, kernelpick
        self.do_bench = triton.testing.do_bench
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.props = torch.cuda.get_device_properties(self.device)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from common import device_slug

        self.label = device_slug(self.props.name)  # "h200", as the other result files
        self._bandwidth: dict[str, Any] | None = None

    # -- measuring -----------------------------------------------------------------------------
    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def first_call_seconds(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        self.sync()
        start = time.perf_counter()
        out = fn()
        self.sync()
        return time.perf_counter() - start, out

    def kernel_ms(self, fns: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
        """do_bench medians, the implementations taking turns round by round (drift hits all alike).

        Each round starts with the next implementation: timed always first, cuBLAS read up to 1.6 %
        faster than the same cuBLAS kernel picked by kernelpick and timed right after it
        (results/gemm_suite-h200-before-finalists.json, 2048x28672x4096).
        """
        samples: dict[str, list[float]] = {name: [] for name in fns}
        names = list(fns)
        for round_number in range(self.args.rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                fn = fns[name]
                samples[name].append(
                    float(self.do_bench(fn, warmup=25, rep=self.args.rep_ms, return_mode="median"))
                )
        return samples

    def back_to_back_us(self, fn: Callable[[], Any], estimate_ms: float) -> float:
        """Microseconds per call of back-to-back calls: launch overhead included, no cache flush."""
        calls = int(min(2000, max(10, 20.0 / max(estimate_ms, 1e-3))))
        fn()
        self.sync()
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        self.sync()
        return float(start.elapsed_time(end)) * 1e3 / calls

    def bandwidth(self) -> dict[str, Any]:
        """The device's HBM bandwidth: its datasheet peak (None for a model kernelpick has no
        figures for) and the copy bandwidth measured on it (kept in the cache dir, measured once)."""
        if self._bandwidth is None:
            from kernelpick.device import describe, device_peaks
            from kernelpick.reports.bandwidth import memory_bandwidth

            peaks = device_peaks(self.props.name)
            copy = memory_bandwidth(describe(self.device))
            self._bandwidth = {
                "peak_gbps": None if peaks is None else peaks.memory_gbps,
                "peak_source": None if peaks is None else f"{peaks.model} datasheet ({peaks.source})",
                "copy_gbps": copy.memory_gbps,
            }
        return self._bandwidth

    def weight_streaming(self, n: int, k: int, kernel_ms: dict[str, float]) -> dict[str, Any]:
        """Each implementation's GB/s if it read W (N x K bf16) once and nothing else, and that as a
        percentage of the datasheet peak and of the measured copy bandwidth."""
        bandwidth = self.bandwidth()
        weight_bytes = n * k * 2
        achieved = {
            name: weight_bytes / (ms * 1e-3) / 1e9 for name, ms in kernel_ms.items() if name != "torch_again"
        }

        def percent(of: float | None) -> dict[str, float] | None:
            return None if not of else {name: 100.0 * gbps / of for name, gbps in achieved.items()}

        return {
            "weight_bytes": weight_bytes,
            **bandwidth,
            "gbps": achieved,
            "percent_of_peak": percent(bandwidth["peak_gbps"]),
            "percent_of_copy": percent(bandwidth["copy_gbps"]),
        }

    # -- one shape -----------------------------------------------------------------------------
    def operands(self, m: int, n: int, k: int) -> tuple[Any, Any, Any]:
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(m * 7 + n * 3 + k)
        a = torch.randn(m, k, device=self.device, dtype=torch.bfloat16, generator=generator)
        if self.args.layout == "nt":
            b = torch.randn(n, k, device=self.device, dtype=torch.bfloat16, generator=generator).t()
        else:
            b = torch.randn(k, n, device=self.device, dtype=torch.bfloat16, generator=generator)
        bias = torch.randn(n, device=self.device, dtype=torch.bfloat16, generator=generator)
        return a, b, bias

    def inductor(
        self, fn: Callable[..., Any], *operands: Any
    ) -> tuple[Callable[[], Any] | None, float | None, str]:
        if self.args.skip_inductor:
            return None, None, "skipped"
        torch = self.torch
        torch._dynamo.reset()
        compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
        try:
            seconds, _ = self.first_call_seconds(lambda: compiled(*operands))
        except Exception as error:  # reported, not fatal: the other columns still mean something
            return None, None, f"{type(error).__name__}: {str(error)[:300]}"
        return (lambda: compiled(*operands)), seconds, "ok"

    def shape(self, m: int, n: int, k: int) -> dict[str, Any]:
        torch, ops = self.torch, self.kernelpick.ops
        a, b, bias = self.operands(m, n, k)
        entry: dict[str, Any] = {"m": m, "n": n, "k": k, "layout": self.args.layout, "dtype": "bfloat16"}
        print(f"[{m}x{n}x{k}] tuning kernelpick.ops.mm ...", flush=True)
        tune_s, out = self.first_call_seconds(lambda: ops.mm(a, b))
        record = ops.selector("mm").last_selection
        expected = torch.mm(a, b)
        entry["kernelpick"] = selection_entry(tune_s, record)
        entry["kernelpick"]["max_abs_error_vs_torch"] = float((out.float() - expected.float()).abs().max())
        if not self.args.skip_inductor:
            print(f"[{m}x{n}x{k}] compiling torch.compile max-autotune ...", flush=True)
        inductor_fn, inductor_s, inductor_status = self.inductor(lambda x, y: torch.mm(x, y), a, b)
        entry["inductor"] = {"compile_s": inductor_s, "status": inductor_status}
        fns: dict[str, Callable[[], Any]] = {
            "torch": lambda: torch.mm(a, b),
            "kernelpick": lambda: ops.mm(a, b),
            "torch_again": lambda: torch.mm(a, b),  # the same call: the suite's own noise
        }
        if inductor_fn is not None:
            fns["inductor"] = inductor_fn
        samples = self.kernel_ms(fns)
        entry["kernel_ms_rounds"] = samples
        entry["kernel_ms"] = {name: statistics.median(s) for name, s in samples.items()}
        entry["noise"] = abs(entry["kernel_ms"]["torch_again"] / entry["kernel_ms"]["torch"] - 1.0)
        if m <= max(DECODE_M):
            entry["hbm"] = self.weight_streaming(n, k, entry["kernel_ms"])
        entry["back_to_back_us"] = {
            name: self.back_to_back_us(fn, entry["kernel_ms"][name]) for name, fn in fns.items()
        }
        if not self.args.no_epilogue:
            entry.update(self.epilogues(a, b, bias))
        return entry

    def epilogues(self, a: Any, b: Any, bias: Any) -> dict[str, Any]:
        """`epilogue` (gelu, as in earlier files) and `epilogue_<activation>` for the others."""
        found = {}
        for activation in filter(None, self.args.activations.split(",")):
            key = "epilogue" if activation == "gelu" else f"epilogue_{activation}"
            found[key] = self.epilogue(a, b, bias, activation)
        return found

    def epilogue(self, a: Any, b: Any, bias: Any, activation: str) -> dict[str, Any]:
        torch, ops = self.torch, self.kernelpick.ops
        apply = {"gelu": torch.nn.functional.gelu, "relu": torch.relu, "silu": torch.nn.functional.silu}
        act = apply[activation]
        tune_s, fused_out = self.first_call_seconds(lambda: ops.addmm(bias, a, b, activation=activation))
        record = ops.selector(f"addmm_{activation}").last_selection
        unfused = lambda: act(torch.addmm(bias, a, b))  # noqa: E731
        samples = self.kernel_ms(
            {"unfused": unfused, "fused": lambda: ops.addmm(bias, a, b, activation=activation)}
        )
        medians = {name: statistics.median(s) for name, s in samples.items()}
        return {
            "activation": activation,
            "tuning_s": tune_s,
            "choice": record.best,
            "kernel_ms_rounds": samples,
            "kernel_ms": medians,
            "speedup": medians["unfused"] / medians["fused"],
            "max_abs_error_vs_torch": float((fused_out.float() - unfused().float()).abs().max()),
            "record": record.to_dict(),
        }

    def dispatch_overhead(self) -> dict[str, Any]:
        """Host time per call of ops.mm against its chosen implementation, on a launch-bound shape."""
        torch, ops = self.torch, self.kernelpick.ops
        a = torch.randn(16, 256, device=self.device, dtype=torch.bfloat16)
        b = torch.randn(256, 256, device=self.device, dtype=torch.bfloat16)
        ops.mm(a, b)
        chosen = ops.selector("mm").implementation(a, b)

        def per_call_us(fn: Callable[..., Any], calls: int = 1000) -> float:
            # The host time of each call on an idle GPU: a loop of calls without waits measures
            # the device instead whenever the kernel takes longer than its launch, and then the
            # difference between two such loops is not the dispatch cost (it read 8.9 us so).
            seconds = []
            for _ in range(calls):
                self.sync()
                start = time.perf_counter()
                fn(a, b)
                seconds.append(time.perf_counter() - start)
            self.sync()
            return statistics.median(seconds) * 1e6

        through, direct = [], []
        for _ in range(7):  # interleaved batches; the quietest of each counts
            through.append(per_call_us(ops.mm))
            direct.append(per_call_us(chosen))
        return {
            "shape": [16, 256, 256],
            "choice": ops.selector("mm").last_selection.best,
            "ops_mm_us": min(through),
            "chosen_us": min(direct),
            "overhead_us": min(through) - min(direct),
        }

    # -- the report ----------------------------------------------------------------------------
    def environment(self, caches: dict[str, str]) -> dict[str, Any]:
        torch = self.torch
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": self.props.name,
            "capability": list(torch.cuda.get_device_capability(self.device)),
            "multiprocessors": self.props.multi_processor_count,
            "versions": {
                "kernelpick": self.kernelpick.__version__,
                "torch": torch.__version__,
                "triton": self.triton.__version__,
                "cuda": torch.version.cuda,
                "python": platform.python_version(),
            },
            "caches": caches or "warm",
            "settings": {"rounds": self.args.rounds, "rep_ms": self.args.rep_ms, "layout": self.args.layout},
            # kernelpick's settings that differ from their defaults (KERNELPICK_OPS_STATIC_SHAPES=0 in
            # an A/B of the templates' shapes, say), the cache folder aside
            "kernelpick_settings": {
                name: value
                for name, value in self.kernelpick.settings.as_environment().items()
                if name != "KERNELPICK_CACHE_DIR"
            },
        }


def summarize(shapes: list[dict[str, Any]], dispatch: dict[str, Any] | None) -> dict[str, Any]:
    pick_vs_best, pick_vs_best_quiet, vs_cublas, fused = [], [], [], []
    decode_percent = [
        e["hbm"]["percent_of_peak"]["kernelpick"]
        for e in shapes
        if (e.get("hbm") or {}).get("percent_of_peak")
    ]
    kp_tuning = inductor_tuning = kp_total = 0.0
    for entry in shapes:
        ms = entry["kernel_ms"]
        best = min(v for name, v in ms.items() if name in ("torch", "inductor"))
        pick_vs_best.append(best / ms["kernelpick"])
        if entry.get("noise", 0.0) < NOISE_LIMIT:
            pick_vs_best_quiet.append(best / ms["kernelpick"])
        vs_cublas.append(ms["torch"] / ms["kernelpick"])
        if "epilogue" in entry:
            fused.append(entry["epilogue"]["speedup"])
        kp_total += entry["kernelpick"]["tuning_s"]
        if entry["inductor"].get("compile_s") is not None:  # compared on the shapes both were tuned for
            kp_tuning += entry["kernelpick"]["tuning_s"]
            inductor_tuning += entry["inductor"]["compile_s"]
    summary = {
        "shapes": len(shapes),
        "pick_vs_best_min": min(pick_vs_best) if pick_vs_best else None,
        "pick_vs_best_min_quiet": min(pick_vs_best_quiet) if pick_vs_best_quiet else None,
        "quiet_shapes": len(pick_vs_best_quiet),
        "noise": sorted(e.get("noise", 0.0) for e in shapes),
        "geomean_vs_cublas": geomean(vs_cublas),
        "fused_vs_unfused_geomean": geomean(fused),
        "fused_vs_unfused_min": min(fused) if fused else None,
        "fused_relu_vs_unfused_geomean": geomean(
            [e["epilogue_relu"]["speedup"] for e in shapes if "epilogue_relu" in e]
        ),
        "tuning_s_kernelpick": kp_tuning,
        "tuning_s_kernelpick_all_shapes": kp_total,
        "tuning_s_inductor": inductor_tuning,
        "dispatch_us": None if dispatch is None else dispatch["overhead_us"],
        "decode_shapes": len(decode_percent),
        "decode_hbm_percent_of_peak_min": min(decode_percent) if decode_percent else None,
    }
    summary["targets"] = {
        "pick_vs_best_min >= 0.99 (shapes with noise < 1 %)": _meets(
            summary["pick_vs_best_min_quiet"], TARGETS["pick_vs_best_min"]
        ),
        "pick_vs_best_min >= 0.99 (every shape)": _meets(
            summary["pick_vs_best_min"], TARGETS["pick_vs_best_min"]
        ),
        f"geomean_vs_cublas >= {TARGETS['geomean_vs_cublas']}": _meets(
            summary["geomean_vs_cublas"], TARGETS["geomean_vs_cublas"]
        ),
        "fused_vs_unfused_geomean >= 1.1": _meets(
            summary["fused_vs_unfused_geomean"], TARGETS["fused_vs_unfused_geomean"]
        ),
        "tuning_s_kernelpick <= inductor": None if not inductor_tuning else kp_tuning <= inductor_tuning,
        "tuning_s_kernelpick <= inductor, every shape": None
        if not inductor_tuning
        else all(
            e["kernelpick"]["tuning_s"] <= e["inductor"]["compile_s"]
            for e in shapes
            if e["inductor"].get("compile_s") is not None
        ),
        "dispatch_us <= 5": None
        if dispatch is None
        else dispatch["overhead_us"] <= TARGETS["dispatch_us_max"],
        "decode picks >= 75 % of HBM peak (streaming W once)": _meets(
            summary["decode_hbm_percent_of_peak_min"], TARGETS["decode_hbm_percent_min"]
        ),
    }
    return summary


def _meets(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target


def print_table(shapes: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    header = f"{'M':>5} {'N':>6} {'K':>6} | {'cuBLAS ms':>9} {'Inductor':>9} {'kernelpick':>10} {'vs best':>7} {'vs cuBLAS':>9} {'noise':>6} | {'fused x':>7} | {'tune s kp/ind':>13} | pick"
    print(header)
    print("-" * len(header))
    for e in sorted(shapes, key=lambda e: (e["m"], e["n"], e["k"])):
        ms = e["kernel_ms"]
        inductor = ms.get("inductor")
        best = min(v for name, v in ms.items() if name in ("torch", "inductor"))
        fused = e.get("epilogue", {}).get("speedup")
        ind_s = e["inductor"].get("compile_s")
        print(
            f"{e['m']:>5} {e['n']:>6} {e['k']:>6} | {ms['torch']:>9.4f} {'-' if inductor is None else f'{inductor:.4f}':>9} "
            f"{ms['kernelpick']:>10.4f} {best / ms['kernelpick']:>7.3f} {ms['torch'] / ms['kernelpick']:>9.3f} "
            f"{100 * e.get('noise', 0.0):>5.1f}% | "
            f"{'-' if fused is None else f'{fused:.3f}':>7} | "
            f"{e['kernelpick']['tuning_s']:>6.1f}/{'-' if ind_s is None else f'{ind_s:.1f}':<6} | {e['kernelpick']['choice'][:40]}"
        )
    decode = sorted((e for e in shapes if e.get("hbm")), key=lambda e: (e["m"], e["n"], e["k"]))
    if decode:
        hbm = decode[0]["hbm"]
        print(
            f"\ndecode shapes: GB/s if W were read once, % of the HBM peak ({hbm['peak_gbps']} GB/s, "
            f"{hbm['peak_source']}) and of the copy bandwidth measured here ({hbm['copy_gbps']:.0f} GB/s)"
        )
        names = ("torch", "inductor", "kernelpick")
        print(f"{'M':>5} {'N':>6} {'K':>6} | " + " | ".join(f"{name:>24}" for name in names))
        for e in decode:
            cells = []
            for name in names:
                gbps = e["hbm"]["gbps"].get(name)
                peak = (e["hbm"]["percent_of_peak"] or {}).get(name)
                copy = (e["hbm"]["percent_of_copy"] or {}).get(name)
                cells.append(
                    "-"
                    if gbps is None
                    else f"{gbps:6.0f} {'-' if peak is None else f'{peak:5.1f}%'} ({copy:5.1f}%)"
                )
            print(f"{e['m']:>5} {e['n']:>6} {e['k']:>6} | " + " | ".join(f"{cell:>24}" for cell in cells))
    print()
    for name, met in summary["targets"].items():
        print(f"target {name}: {'met' if met else 'MISSED' if met is False else 'not measured'}")
    print(
        f"pick/best min {summary['pick_vs_best_min']}, geomean vs cuBLAS {summary['geomean_vs_cublas']}, "
        f"fused/unfused geomean {summary['fused_vs_unfused_geomean']}, tuning s "
        f"{summary['tuning_s_kernelpick_all_shapes']:.1f} (kernelpick, every shape), "
        f"{summary['tuning_s_kernelpick']:.1f} (kernelpick) vs {summary['tuning_s_inductor']:.1f} (Inductor) "
        f"on the shapes both tuned, dispatch {summary['dispatch_us']} µs"
    )


def plot(shapes: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ordered = sorted(shapes, key=lambda e: (e["m"], e["n"], e["k"]))
    labels = [f"{e['m']}x{e['n']}x{e['k']}" for e in ordered]
    series = {
        "kernelpick": [e["kernel_ms"]["torch"] / e["kernel_ms"]["kernelpick"] for e in ordered],
        "Inductor": [
            e["kernel_ms"]["torch"] / e["kernel_ms"]["inductor"] if "inductor" in e["kernel_ms"] else 0
            for e in ordered
        ],
        "fused addmm+gelu vs unfused": [e.get("epilogue", {}).get("speedup", 0) for e in ordered],
    }
    figure, axis = plt.subplots(figsize=(max(8, len(labels) * 0.6), 5))
    width = 0.8 / len(series)
    for index, (name, values) in enumerate(series.items()):
        axis.bar([i + index * width for i in range(len(labels))], values, width, label=name)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(
        [i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=60, ha="right", fontsize=7
    )
    axis.set_ylabel("speed-up over cuBLAS (torch.mm)")
    axis.set_title("bf16 GEMM, Llama shapes")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def epilogue_only(suite: Suite, shapes: list[tuple[int, int, int]], caches: dict[str, str]) -> int:
    """The fused comparisons alone, into gemm_epilogue-<device>.json."""
    args = suite.args
    path = args.out / f"gemm_epilogue-{suite.label}.json"
    results: dict[str, Any] = {"runs": [suite.environment(caches)], "shapes": []}
    for m, n, k in shapes:
        print(f"[{m}x{n}x{k}] fused epilogues ...", flush=True)
        a, b, bias = suite.operands(m, n, k)
        entry = {"m": m, "n": n, "k": k, "layout": args.layout, "dtype": "bfloat16"}
        entry.update(suite.epilogues(a, b, bias))
        results["shapes"].append(entry)
        path.write_text(json.dumps(results, indent=1))
    summary: dict[str, Any] = {}
    keys = [key for key in results["shapes"][0] if key.startswith("epilogue")] if results["shapes"] else []
    for key in keys:
        speedups = [e[key]["speedup"] for e in results["shapes"]]
        summary[key] = {"geomean": geomean(speedups), "min": min(speedups), "max": max(speedups)}
    results["summary"] = summary
    path.write_text(json.dumps(results, indent=1))
    for e in results["shapes"]:
        fused = "  ".join(
            f"{e[key]['activation']} {e[key]['speedup']:.3f} ({e[key]['choice'][:34]})"
            for key in e
            if key.startswith("epilogue")
        )
        print(f"{e['m']:>5} {e['n']:>6} {e['k']:>6} | {fused}")
    print(f"\nwrote {path}\n{summary}")
    return 0


def selection_entry(tuning_s: float, record: Any) -> dict[str, Any]:
    """What a suite keeps of a selection (a `SelectionRecord`): its tuning time, its pick, how many
    choices it had, why each that failed did, and the whole record."""
    return {
        "tuning_s": tuning_s,
        "choice": record.best,
        "choices": len(record.results),
        "failed": {
            r.name: f"{r.result.status}: {r.result.message[:200]}"
            for r in record.candidates
            if not r.result.ok
        },
        "record": record.to_dict(),
    }


def main() -> int:
    args = parse()
    caches = fresh_caches(args)
    wanted_m = set(DECODE_M) if args.decode else {int(v) for v in args.m.split(",") if v}
    indices = {int(v) for v in args.shapes.split(",") if v}
    shapes = [s for i, s in enumerate(SHAPES) if s[0] in wanted_m and (not indices or i in indices)]
    suite = Suite(args)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.epilogue_only:
        return epilogue_only(suite, shapes, caches)
    path = args.out / f"gemm_suite-{suite.label}.json"
    results: dict[str, Any] = {} if args.fresh or not path.exists() else json.loads(path.read_text())
    runs = results.setdefault("runs", [])
    runs.append(suite.environment(caches))
    entries = {(e["m"], e["n"], e["k"], e["layout"]): e for e in results.get("shapes", [])}
    for m, n, k in shapes:
        entry = suite.shape(m, n, k)
        entry["run"] = len(runs) - 1
        entries[(m, n, k, args.layout)] = entry
        results["shapes"] = list(entries.values())
        path.write_text(
            json.dumps(results, indent=1)
        )  # after every shape: a run cut short keeps what it measured
    results["dispatch"] = suite.dispatch_overhead()
    results["summary"] = summarize(results["shapes"], results["dispatch"])
    path.write_text(json.dumps(results, indent=1))
    plotted = plot(results["shapes"], path.with_suffix(".png"))
    print(
        f"\nwrote {path}" + (f" and {path.with_suffix('.png')}" if plotted else " (no matplotlib: no plot)")
    )
    print_table(results["shapes"], results["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
