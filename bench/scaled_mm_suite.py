"""fp8 GEMM suite: `kernelpick.ops.scaled_mm` against `torch._scaled_mm` and Inductor's max-autotune, on Llama shapes.

Run on a GPU machine with fp8 tensor cores (sm_89+) from the repository root (jinja2, rich and numpy
are needed besides torch and triton, as for bench/gemm_suite.py, whose helpers this script uses):

    PYTHONPATH=src python3 bench/scaled_mm_suite.py --m 1,16          # 12 shapes
    PYTHONPATH=src python3 bench/scaled_mm_suite.py --m 128,2048      # each run adds to the same results file
    PYTHONPATH=src python3 bench/scaled_mm_suite.py --scaling row --fast-accum   # another variant, kept apart

Every shape is `x @ W.T` of fp8 (e4m3) operands as an fp8 linear layer computes it:
`torch._scaled_mm(x8, w8.t(), scale_x, scale_w, out_dtype=torch.bfloat16)`, with x and W quantized
from standard normal values, for M in {1, 16, 128, 2048} by the six (N, K) pairs of the GEMM suite.
The variant is the scales (`--scaling tensor`, one each, the default; `row`: per row of x and of W),
`--fast-accum` (torch's use_fast_accum) and `--bias` (a bf16 bias). For each shape, with empty caches
(fresh KERNELPICK_CACHE_DIR, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR), it measures:

- tuning time: kernelpick's first call, and Inductor's first call of `torch.compile(mode=
  "max-autotune-no-cudagraphs")` of the same `torch._scaled_mm` expression;
- kernel time: `triton.testing.do_bench` medians (L2 flushed), in interleaved rounds; torch._scaled_mm
  is timed twice per round (`torch` and `torch_again`), and their disagreement is the shape's own
  noise: a pick is judged against the 0.99 target only where it is < 1 %;
- per-call time of back-to-back calls (launch overhead included, no flush);
- the largest difference of kernelpick's output from torch's, relative to the output's RMS.

Results go to bench/results/scaled_mm_suite-<device>.json (date, versions, raw figures, the targets),
merged with earlier runs of the same device (shapes keyed by M, N, K and the variant). The table of
the variant's shapes in the file is printed last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_suite import NK_PAIRS, NOISE_LIMIT, Suite, fresh_caches, geomean, selection_entry

M_VALUES = (1, 16, 128, 2048)
SHAPES = [(m, n, k) for m in M_VALUES for n, k in NK_PAIRS]
TARGETS = {"pick_vs_best_min": 0.99}
#: The largest fp8 value of e4m3: quantizing divides by amax / FP8_MAX.
FP8_MAX = 448.0


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", default=",".join(map(str, M_VALUES)), help="comma-separated M values to run")
    parser.add_argument("--shapes", default="", help="comma-separated indices into the 24 shapes (0-23)")
    parser.add_argument(
        "--scaling", choices=("tensor", "row"), default="tensor", help="per-tensor or per-row scales"
    )
    parser.add_argument("--fast-accum", action="store_true", help="use_fast_accum=True")
    parser.add_argument("--bias", action="store_true", help="add a bf16 bias")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per shape")
    parser.add_argument("--rep-ms", type=int, default=50, help="do_bench rep per round, in ms")
    parser.add_argument("--skip-inductor", action="store_true", help="leave torch.compile out")
    parser.add_argument(
        "--warm-caches", action="store_true", help="keep existing caches (tuning times then mean little)"
    )
    parser.add_argument("--fresh", action="store_true", help="start a new results file instead of merging")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.layout = "nt"  # what gemm_suite's environment() records: B = W.T
    return args


def variant(args: argparse.Namespace) -> str:
    """The variant's name in the results file: "tensor", "row+fast+bias", ..."""
    return "+".join([args.scaling, *(["fast"] if args.fast_accum else []), *(["bias"] if args.bias else [])])


class ScaledSuite(Suite):
    def operands(self, m: int, n: int, k: int) -> tuple[Any, ...]:  # type: ignore[override]
        """x8 (M, K), w8.t() (K, N) column-major, the scales and the bias (None without --bias)."""
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(m * 7 + n * 3 + k)
        x = torch.randn(m, k, device=self.device, generator=generator)
        w = torch.randn(n, k, device=self.device, generator=generator)
        if self.args.scaling == "row":
            scale_x = x.abs().amax(dim=1, keepdim=True) / FP8_MAX
            scale_w = w.abs().amax(dim=1, keepdim=True) / FP8_MAX
            scale_a, scale_b = scale_x, scale_w.t().contiguous()
        else:
            scale_x, scale_w = x.abs().max() / FP8_MAX, w.abs().max() / FP8_MAX
            scale_a, scale_b = scale_x, scale_w
        a = (x / scale_x).to(torch.float8_e4m3fn)
        b = (w / scale_w).to(torch.float8_e4m3fn).t()
        bias = (
            torch.randn(n, device=self.device, generator=generator).to(torch.bfloat16)
            if self.args.bias
            else None
        )
        return a, b, scale_a.float(), scale_b.float(), bias

    def shape(self, m: int, n: int, k: int) -> dict[str, Any]:
        torch, ops = self.torch, self.kernelpick.ops
        from kernelpick.ops.scaled_mm import selector_name

        a, b, scale_a, scale_b, bias = self.operands(m, n, k)
        fast = self.args.fast_accum
        entry: dict[str, Any] = {
            "m": m,
            "n": n,
            "k": k,
            "variant": variant(self.args),
            "dtype": "float8_e4m3fn",
        }

        def kernelpick_call() -> Any:
            return ops.scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16, use_fast_accum=fast)

        def torch_call() -> Any:
            return torch._scaled_mm(
                a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16, use_fast_accum=fast
            )

        print(f"[{m}x{n}x{k} {entry['variant']}] tuning kernelpick.ops.scaled_mm ...", flush=True)
        tune_s, out = self.first_call_seconds(kernelpick_call)
        record = ops.selector(
            selector_name(torch.bfloat16, bias=bias is not None, use_fast_accum=fast)
        ).last_selection
        expected = torch_call().float()
        rms = float(expected.pow(2).mean().sqrt()) or 1.0
        entry["kernelpick"] = selection_entry(tune_s, record)
        entry["kernelpick"]["max_error_vs_torch_over_rms"] = float((out.float() - expected).abs().max()) / rms
        if not self.args.skip_inductor:
            print(f"[{m}x{n}x{k} {entry['variant']}] compiling torch.compile max-autotune ...", flush=True)

        def expression(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any) -> Any:
            return torch._scaled_mm(
                a, b, scale_a, scale_b, bias, out_dtype=torch.bfloat16, use_fast_accum=fast
            )

        inductor_fn, inductor_s, inductor_status = self.inductor(expression, a, b, scale_a, scale_b, bias)
        entry["inductor"] = {"compile_s": inductor_s, "status": inductor_status}
        fns: dict[str, Callable[[], Any]] = {
            "torch": torch_call,
            "kernelpick": kernelpick_call,
            "torch_again": torch_call,  # the same call: the suite's own noise
        }
        if inductor_fn is not None:
            fns["inductor"] = inductor_fn
        samples = self.kernel_ms(fns)
        entry["kernel_ms_rounds"] = samples
        entry["kernel_ms"] = {name: statistics.median(s) for name, s in samples.items()}
        entry["noise"] = abs(entry["kernel_ms"]["torch_again"] / entry["kernel_ms"]["torch"] - 1.0)
        entry["back_to_back_us"] = {
            name: self.back_to_back_us(fn, entry["kernel_ms"][name]) for name, fn in fns.items()
        }
        return entry


def summarize(shapes: list[dict[str, Any]]) -> dict[str, Any]:
    pick_vs_best, pick_vs_best_quiet, vs_torch = [], [], []
    kp_tuning = inductor_tuning = 0.0
    for entry in shapes:
        ms = entry["kernel_ms"]
        best = min(v for name, v in ms.items() if name in ("torch", "inductor"))
        pick_vs_best.append(best / ms["kernelpick"])
        if entry.get("noise", 0.0) < NOISE_LIMIT:
            pick_vs_best_quiet.append(best / ms["kernelpick"])
        vs_torch.append(ms["torch"] / ms["kernelpick"])
        if entry["inductor"].get("compile_s") is not None:  # compared on the shapes both were tuned for
            kp_tuning += entry["kernelpick"]["tuning_s"]
            inductor_tuning += entry["inductor"]["compile_s"]
    summary = {
        "shapes": len(shapes),
        "pick_vs_best_min": min(pick_vs_best) if pick_vs_best else None,
        "pick_vs_best_min_quiet": min(pick_vs_best_quiet) if pick_vs_best_quiet else None,
        "quiet_shapes": len(pick_vs_best_quiet),
        "geomean_vs_torch": geomean(vs_torch),
        "tuning_s_kernelpick": kp_tuning,  # the shapes Inductor was tuned for too
        "tuning_s_inductor": inductor_tuning,
        "tuning_s_kernelpick_all_shapes": sum(entry["kernelpick"]["tuning_s"] for entry in shapes),
    }
    target = TARGETS["pick_vs_best_min"]
    quiet, every = summary["pick_vs_best_min_quiet"], summary["pick_vs_best_min"]
    summary["targets"] = {
        "pick_vs_best_min >= 0.99 (shapes with noise < 1 %)": None if quiet is None else quiet >= target,
        "pick_vs_best_min >= 0.99 (every shape)": None if every is None else every >= target,
        "tuning_s_kernelpick <= inductor, every shape": None
        if not inductor_tuning
        else all(
            e["kernelpick"]["tuning_s"] <= e["inductor"]["compile_s"]
            for e in shapes
            if e["inductor"].get("compile_s") is not None
        ),
    }
    return summary


def print_table(shapes: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    header = (
        f"{'M':>5} {'N':>6} {'K':>6} | {'torch ms':>9} {'Inductor':>9} {'kernelpick':>10} {'vs best':>7} "
        f"{'vs torch':>8} {'noise':>6} | {'tune s kp/ind':>13} | pick"
    )
    print(header)
    print("-" * len(header))
    for e in sorted(shapes, key=lambda e: (e["m"], e["n"], e["k"])):
        ms = e["kernel_ms"]
        inductor = ms.get("inductor")
        best = min(v for name, v in ms.items() if name in ("torch", "inductor"))
        ind_s = e["inductor"].get("compile_s")
        print(
            f"{e['m']:>5} {e['n']:>6} {e['k']:>6} | {ms['torch']:>9.4f} "
            f"{'-' if inductor is None else f'{inductor:.4f}':>9} {ms['kernelpick']:>10.4f} "
            f"{best / ms['kernelpick']:>7.3f} {ms['torch'] / ms['kernelpick']:>8.3f} "
            f"{100 * e.get('noise', 0.0):>5.1f}% | "
            f"{e['kernelpick']['tuning_s']:>6.1f}/{'-' if ind_s is None else f'{ind_s:.1f}':<6} | "
            f"{e['kernelpick']['choice'][:44]}"
        )
    print()
    for name, met in summary["targets"].items():
        print(f"target {name}: {'met' if met else 'MISSED' if met is False else 'not measured'}")
    print(
        f"pick/best min {summary['pick_vs_best_min']}, geomean vs torch._scaled_mm {summary['geomean_vs_torch']}, "
        f"tuning s {summary['tuning_s_kernelpick']:.1f} (kernelpick) vs {summary['tuning_s_inductor']:.1f} (Inductor)"
        f" on the shapes both tuned; kernelpick {summary['tuning_s_kernelpick_all_shapes']:.1f} s on all"
    )


def main() -> int:
    args = parse()
    caches = fresh_caches(args)
    wanted_m = {int(v) for v in args.m.split(",") if v}
    indices = {int(v) for v in args.shapes.split(",") if v}
    shapes = [s for i, s in enumerate(SHAPES) if s[0] in wanted_m and (not indices or i in indices)]
    suite = ScaledSuite(args)
    capability = suite.torch.cuda.get_device_capability(suite.device)
    if capability < (8, 9):
        print(f"fp8 needs sm_89 or newer; {suite.props.name} is sm_{capability[0]}{capability[1]}")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"scaled_mm_suite-{suite.label}.json"
    results: dict[str, Any] = {} if args.fresh or not path.exists() else json.loads(path.read_text())
    runs = results.setdefault("runs", [])
    environment = suite.environment(caches)
    environment["settings"].update(variant=variant(args))
    runs.append(environment)
    entries = {(e["m"], e["n"], e["k"], e["variant"]): e for e in results.get("shapes", [])}
    for m, n, k in shapes:
        entry = suite.shape(m, n, k)
        entry["run"] = len(runs) - 1
        entries[(m, n, k, entry["variant"])] = entry
        results["shapes"] = list(entries.values())
        path.write_text(
            json.dumps(results, indent=1)
        )  # after every shape: a run cut short keeps what it measured
    mine = [e for e in results["shapes"] if e["variant"] == variant(args)]
    summaries = results.setdefault("summary", {})
    summaries[variant(args)] = summarize(mine)
    path.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {path}")
    print_table(mine, summaries[variant(args)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
