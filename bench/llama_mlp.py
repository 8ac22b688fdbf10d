"""Llama-3 blocks (the MLP, the attention projections) with `kernelpick.ops.mm` against torch and
Inductor's max-autotune, per forward, in the three ways a model runs: eager, compiled, CUDA graphs.

Run on a GPU machine from the repository root (as for bench/gemm_suite.py, whose helpers this script
uses: jinja2, rich and numpy besides torch and triton):

    PYTHONPATH=src python3 bench/llama_mlp.py --sizes 8b          # Llama-3 8B, M = 1, 4, 16, 128, 2048
    PYTHONPATH=src python3 bench/llama_mlp.py --sizes 70b --blocks attn --modes graph
    PYTHONPATH=src python3 bench/llama_mlp.py --sizes 8b:1,70b:16 --fused-gate-up
    PYTHONPATH=src python3 bench/llama_mlp.py --dry --out /tmp    # the bookkeeping on the CPU (see below)

The blocks, in bf16 with no biases, for x of M tokens (batch x sequence, flattened), Llama-3 8B (hidden
4096, intermediate 14336) and 70B (8192, 28672), both with 8 key-value heads of 128 (1024 columns):

- `mlp`: `down(silu(gate(x)) * up(x))`;
- `attn`: the fused QKV projection of x (hidden + 2 x 1024 columns) and the output projection (hidden
  columns) of an attention output, which x stands in for (same shape): the two GEMMs of a layer's
  attention that are not attention itself.

M in {1, 4, 16} (decode) and {128, 2048} (prefill). The weights are random, scaled as nn.Linear's (1 /
sqrt(fan_in)), and shared by the variants, each a forward of the same block. Per mode (`--modes`), the
plain module (`F.linear`) against the module whose projections call `kernelpick.ops.mm(x, W.t())`:

| mode | baseline | kernelpick |
|---|---|---|
| `eager` | `eager`: the plain module (cuBLAS) | `kernelpick_eager`: ops.mm selects in eager |
| `compiled` | `inductor`: `mode="max-autotune-no-cudagraphs"` | `kernelpick`: `torch.compile` default |
| `graph` | `inductor_graph`: `mode="max-autotune"` (CUDA graphs) | `kernelpick_graph`: `mode="reduce-overhead"` |

Compiled, each projection is tuned while compiling (or found tuned: the eager variant runs first, and
its selections are this process's) and the graph runs its pick where `KERNELPICK_COMPILED_PICKS` lets it
(`all`, the default: Triton templates too; `library`: `torch.mm` only), else the operator
`torch.ops.kernelpick.mm`, which selects at run time (`off`: always); the setting is kept with the
results. Compiled, the MLP's gate and up become one `kernelpick.ops.gated_mm` (`KERNELPICK_OPS_FUSION`,
on by default: the settings kept say which). With `--fused-gate-up` (MLP, compiled mode), `kernelpick_fused`: gate and up as one product of
the concatenated weight (2 x intermediate columns), split after it. With `--gated` (MLP, every mode):
`kernelpick_gated_eager`, `kernelpick_gated` and `kernelpick_gated_graph`, the block through
`kernelpick.ops.gated_mm(x, gate.t(), up.t())` (the SiLU-and-product fused into one product of both
weights, unconcatenated) then `ops.mm` for down: two operators a forward. The CUDA-graph variants call
`torch.compiler.cudagraph_mark_step_begin()` before each forward, as a serving loop does.

Every process starts with empty caches (fresh KERNELPICK_CACHE_DIR, TRITON_CACHE_DIR,
TORCHINDUCTOR_CACHE_DIR, as gemm_suite.fresh_caches makes them). Per size (model, block, M) it records:

- each variant's first forward in seconds: Dynamo and Inductor compile, Inductor's autotuning, and
  kernelpick's selections (the first call of each new projection shape tunes it);
- ms per forward: `triton.testing.do_bench` medians (L2 flushed), the variants taking turns in
  interleaved rounds (gemm_suite's `Suite.kernel_ms`); eager is timed twice per round (`eager` and
  `eager_again`) and their disagreement is the size's own noise;
- `speedup`: each kernelpick variant's over each baseline (their ms over its ms);
- `hbm_floor_us`: the weights read once at the datasheet's HBM bandwidth, and `floor_fraction`: that
  over each variant's time (1.0: as fast as the weights can be read);
- kernelpick's pick for each projection (gate, up, down, gate_up; qkv, o), from the selections its
  first forward made;
- each variant's largest absolute difference from eager's output, and that over eager's largest
  absolute value;
- the rounds start after one untimed round of every variant: an H200 idles at a low clock through
  the compiling before it, and ramps up under the first round (the 2026-11-29 file's rounds 1-2 of
  the compiled variants at M = 1 read 0.12-0.18 ms, rounds 3-5 0.10);
- `replayed_us` (GPU only): device microseconds per forward with the host out of the loop, as a
  serving engine runs a model it captured whole: 8 forwards of each variant that is not a CUDA-graph
  variant itself (eager, kernelpick_eager, inductor, kernelpick, kernelpick_fused) captured in one
  `torch.cuda.CUDAGraph` by hand (as vLLM captures an Inductor-compiled model compiled without
  graphs), its replays timed with events (median of 20, over 8). The reduce-overhead variants' own
  figures keep the cost of CUDA-graph trees' Python per call; `replayed_floor_fraction` is the HBM
  floor over these;
- after the rounds, each variant's host time per forward (`host_us`: 200 forwards back to back, the
  time until the last returns, the GPU synchronized only before and after) and its GPU time per
  forward back to back (`back_to_back_us`, no cache flush): a variant whose host time nears its GPU
  time is bound by launching, and its do_bench figures by the host's speed at the time.

Results go to bench/results/llama_mlp-<device>.json (date, versions, device, raw figures; also to
$OUT where it is set), merged with earlier runs of the same device (sizes keyed by model, block and
M; entries of files from before blocks existed are MLPs); the summary keeps, per pair of kernelpick
variant and baseline, the geomean and the worst speedup (`kernelpick_graph_vs_inductor_graph_min`:
CUDA graphs). The table of every size in the file is printed last. No size is started that would
take the run past `--budget-s` (480 s) on the estimate of the longest size so far: the sizes left are
printed, with the arguments that run them.

--dry runs the same steps on the CPU in float32 with small blocks (hidden 32 and 64), kernelpick's
templates in Triton's interpreter and Inductor compiling C++ (no CUDA graphs: the graph mode compiles
as reduce-overhead does without them); its timings are the wall clock and say nothing. It writes only
where --out says (tests/bench_scripts/test_llama_mlp.py runs it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, device_slug, environment, graph_of, wall_clock_ms, write_result
from gemm_suite import Suite, fresh_caches, geomean

#: (hidden, intermediate) of the Llama-3 models.
MODELS = {"8b": (4096, 14336), "70b": (8192, 28672)}
#: Columns of K and of V in the fused QKV projection: 8 key-value heads of 128 (both models).
KV_COLUMNS = 1024
#: Tokens per forward: decode steps (1, 4, 16), prefill (128, 2048).
M_VALUES = (1, 4, 16, 128, 2048)
#: --dry: blocks small enough for Triton's interpreter, the intermediate size not a multiple of hidden.
DRY_MODELS = {"8b": (32, 48), "70b": (64, 80)}
DRY_KV_COLUMNS = 16
DRY_M_VALUES = (1, 4, 16)
BLOCKS = ("mlp", "attn")
#: mode: (baseline, kernelpick's variant); `eager_again` is eager timed a second time.
MODES = {
    "eager": ("eager", "kernelpick_eager"),
    "compiled": ("inductor", "kernelpick"),
    "graph": ("inductor_graph", "kernelpick_graph"),
}
BASELINES = ("eager", "inductor", "inductor_graph")
#: Variants captured whole in a graph by hand (`replayed_us`): (kernelpick's, its baseline).
REPLAYED = (
    ("kernelpick_eager", "eager"),
    ("kernelpick", "inductor"),
    ("kernelpick_fused", "inductor"),
    ("kernelpick_gated_eager", "eager"),
    ("kernelpick_gated", "inductor"),
)
#: The `kernelpick.ops` selectors whose picks a size records: the GEMM's and the gated MLP's.
SELECTORS = ("mm", "gated_mm_silu")
#: Forwards in one captured graph, and the replays timed.
REPLAY_FORWARDS, REPLAYS = 8, 20
KERNELPICK = (
    "kernelpick_eager",
    "kernelpick",
    "kernelpick_graph",
    "kernelpick_fused",
    "kernelpick_gated_eager",
    "kernelpick_gated",
    "kernelpick_gated_graph",
)
#: The timed variants, in the order of the table.
VARIANTS = (
    "eager",
    "kernelpick_eager",
    "inductor",
    "kernelpick",
    "kernelpick_fused",
    "kernelpick_gated_eager",
    "kernelpick_gated",
    "inductor_graph",
    "kernelpick_graph",
    "kernelpick_gated_graph",
)
#: Seconds kept free at the end of --budget-s for the summary and the file.
RESERVE_S = 10.0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="",
        help="comma-separated sizes: MODEL:M (8b:16), MODEL (every M of it) or M (that M of every "
        f"model); models {', '.join(MODELS)}, M in {', '.join(map(str, M_VALUES))} (default: all ten)",
    )
    parser.add_argument("--blocks", default=",".join(BLOCKS), help=f"comma-separated, of {', '.join(BLOCKS)}")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument(
        "--fused-gate-up", action="store_true", help="also time kernelpick with gate and up as one product"
    )
    parser.add_argument(
        "--gated", action="store_true", help="also time the MLP through kernelpick.ops.gated_mm, every mode"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per size")
    parser.add_argument("--rep-ms", type=int, default=50, help="do_bench rep per round, in ms")
    parser.add_argument(
        "--warmup-rounds", type=int, default=1, help="untimed rounds of every variant before the rounds"
    )
    parser.add_argument(
        "--budget-s", type=float, default=480, help="start no size that would end the run later than this"
    )
    parser.add_argument(
        "--warm-caches", action="store_true", help="keep existing caches (compile times then mean little)"
    )
    parser.add_argument("--fresh", action="store_true", help="start a new results file instead of merging")
    parser.add_argument("--dry", action="store_true", help="on the CPU: float32, small blocks, M = 1, 4, 16")
    parser.add_argument(
        "--out", type=Path, default=None, help="folder of the results file (default: bench/results)"
    )
    args = parser.parse_args(argv)
    args.blocks = listed(args.blocks, BLOCKS, "--blocks")
    args.modes = listed(args.modes, tuple(MODES), "--modes")
    return args


def listed(text: str, known: tuple[str, ...], option: str) -> list[str]:
    """The names of a comma-separated option, in `known`'s order.

    Raises:
        SystemExit: a name is not one of `known`, or none is given.
    """
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SystemExit(f"{option} {text!r}: expected names of {', '.join(known)}, comma-separated")
    return [name for name in known if name in names]


def sizes(spec: str, dry: bool) -> list[tuple[str, int]]:
    """The (model, M) pairs `--sizes` names, in the order model by model, M ascending.

    Raises:
        SystemExit: an item names no model or M of this run (the message lists them).
    """
    models, m_values = (DRY_MODELS, DRY_M_VALUES) if dry else (MODELS, M_VALUES)
    every = [(model, m) for model in models for m in m_values]
    if not spec:
        return every
    wanted: set[tuple[str, int]] = set()
    for item in filter(None, (part.strip() for part in spec.split(","))):
        if ":" in item:
            model, _, m = item.partition(":")
        else:
            model, m = (item, "") if item in models else ("", item)
        picked = [s for s in every if (not model or s[0] == model) and (not m or str(s[1]) == m)]
        if not picked:
            raise SystemExit(
                f"--sizes {item!r} names no size of this run: use MODEL:M, MODEL or M with models "
                f"{', '.join(models)} and M in {', '.join(map(str, m_values))}"
            )
        wanted.update(picked)
    return [s for s in every if s in wanted]


def cpu_ms(fn: Callable[[], Any], warmup: int = 0, rep: int = 0, return_mode: str = "median") -> float:
    """--dry's stand-in for `triton.testing.do_bench` (same arguments): `common.wall_clock_ms`."""
    return wall_clock_ms(fn)


class BlockBench(Suite):
    """gemm_suite's Suite (its first-call timing and interleaved rounds) for the blocks' variants, on
    the CPU too (--dry)."""

    def __init__(self, args: argparse.Namespace) -> None:
        if not args.dry:
            super().__init__(args)
        else:
            import torch
            import triton

            import kernelpick
            import kernelpick.ops

            self.args, self.torch, self.triton, self.kernelpick = args, torch, triton, kernelpick
            self.do_bench = cpu_ms
            self.device = torch.device("cpu")
            self.label = "dry"
        self.dtype = self.torch.float32 if args.dry else self.torch.bfloat16
        self.kv_columns = DRY_KV_COLUMNS if args.dry else KV_COLUMNS

    def sync(self) -> None:
        if not self.args.dry:
            super().sync()

    # -- the blocks ----------------------------------------------------------------------------
    def weights(self, block: str, hidden: int, intermediate: int) -> dict[str, Any]:
        """Each projection's weight (out features, in features), scaled as nn.Linear's."""
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(hidden * 3 + intermediate)
        kv = self.kv_columns

        def weight(rows: int, columns: int) -> Any:
            w = torch.randn(rows, columns, device=self.device, generator=generator) / columns**0.5
            return w.to(self.dtype)

        if block == "attn":
            return {"qkv": weight(hidden + 2 * kv, hidden), "o": weight(hidden, hidden)}
        return {
            "gate": weight(intermediate, hidden),
            "up": weight(intermediate, hidden),
            "down": weight(hidden, intermediate),
        }

    def modules(self, block: str, weights: dict[str, Any]) -> dict[str, Any]:
        """The plain block (eager and Inductor run it) and the blocks calling kernelpick.ops.mm."""
        torch, ops = self.torch, self.kernelpick.ops
        functional = torch.nn.functional

        class Block(torch.nn.Module):
            def __init__(self, fused: bool = False) -> None:
                super().__init__()
                for name, w in weights.items():
                    self.register_buffer(name, w)
                if fused:
                    self.register_buffer("gate_up", torch.cat([weights["gate"], weights["up"]]))

        class PlainMLP(Block):
            def forward(self, x: Any) -> Any:
                return functional.linear(
                    functional.silu(functional.linear(x, self.gate)) * functional.linear(x, self.up),
                    self.down,
                )

        class KernelpickMLP(Block):
            def forward(self, x: Any) -> Any:
                return ops.mm(
                    functional.silu(ops.mm(x, self.gate.t())) * ops.mm(x, self.up.t()), self.down.t()
                )

        class KernelpickGatedMLP(Block):
            def forward(self, x: Any) -> Any:
                return ops.mm(ops.gated_mm(x, self.gate.t(), self.up.t()), self.down.t())

        class KernelpickFusedMLP(Block):
            def forward(self, x: Any) -> Any:
                gate, up = ops.mm(x, self.gate_up.t()).chunk(2, dim=1)
                return ops.mm(functional.silu(gate) * up, self.down.t())

        class PlainAttention(Block):
            def forward(self, x: Any) -> Any:
                return functional.linear(x, self.qkv), functional.linear(x, self.o)

        class KernelpickAttention(Block):
            def forward(self, x: Any) -> Any:
                return ops.mm(x, self.qkv.t()), ops.mm(x, self.o.t())

        if block == "attn":
            return {"plain": PlainAttention().eval(), "kernelpick": KernelpickAttention().eval()}
        found = {"plain": PlainMLP().eval(), "kernelpick": KernelpickMLP().eval()}
        if self.args.fused_gate_up:
            found["kernelpick_fused"] = KernelpickFusedMLP(fused=True).eval()
        if self.args.gated:
            found["kernelpick_gated"] = KernelpickGatedMLP().eval()
        return found

    def projections(
        self, block: str, hidden: int, intermediate: int
    ) -> dict[tuple[int, int], tuple[str, ...]]:
        """(N, K) of each projection's product: its names (gate and up share one)."""
        if block == "attn":
            return {(hidden + 2 * self.kv_columns, hidden): ("qkv",), (hidden, hidden): ("o",)}
        return {
            (intermediate, hidden): ("gate", "up"),
            (hidden, intermediate): ("down",),
            (2 * intermediate, hidden): ("gate_up",),
        }

    # -- one size ------------------------------------------------------------------------------
    def size(self, model: str, block: str, m: int, hidden: int, intermediate: int) -> dict[str, Any]:
        with self.torch.no_grad():  # inference
            return self._size(model, block, m, hidden, intermediate)

    def _size(self, model: str, block: str, m: int, hidden: int, intermediate: int) -> dict[str, Any]:
        torch = self.torch
        torch._dynamo.reset()  # a block's forward is one code object: recompiles per size hit its limit
        weights = self.weights(block, hidden, intermediate)
        modules = self.modules(block, weights)
        generator = torch.Generator(device=self.device).manual_seed(m)
        x = torch.randn(m, hidden, device=self.device, generator=generator).to(self.dtype)
        entry: dict[str, Any] = {
            "model": model,
            "block": block,
            "m": m,
            "hidden": hidden,
            "intermediate": intermediate,
            "dtype": str(self.dtype).removeprefix("torch."),
            "weight_bytes": sum(w.numel() * w.element_size() for w in weights.values()),
        }
        label = f"[{model} {block} M={m}]"
        forwards: dict[str, Callable[[], Any]] = {}
        first: dict[str, Any] = {}
        outputs: dict[str, Any] = {}
        errors: dict[str, str] = {}
        picks: dict[str, Any] = {}
        mark_step = torch.compiler.cudagraph_mark_step_begin

        def add(name: str, module: Any, mode: str | None, graphs: bool = False) -> None:
            print(f"{label} {name} ...", flush=True)
            run = module if mode is None else torch.compile(module, mode=mode, dynamic=False)
            if graphs:

                def forward(run: Any = run) -> Any:
                    mark_step()
                    return run(x)
            else:

                def forward(run: Any = run) -> Any:
                    return run(x)

            known = {(name, key) for name in SELECTORS for key in self.kernelpick.ops.selector(name).records}
            try:
                first[name], outputs[name] = self.first_call_seconds(forward)
                forwards[name] = forward
            except Exception as error:  # reported, not fatal: the other variants still mean something
                errors[name] = f"{type(error).__name__}: {error}"[:500]
                return
            if name in KERNELPICK:
                found = self.picks(known, m, self.projections(block, hidden, intermediate))
                if found:
                    picks[name] = found
            if graphs:  # the output of a replay is overwritten by the next: keep a copy
                outputs[name] = [o.clone() for o in as_tuple(outputs[name])]

        plain, kernelpick = modules["plain"], modules["kernelpick"]
        add("eager", plain, None)
        forwards["eager_again"] = forwards["eager"]
        modes = self.args.modes
        if "eager" in modes:
            add("kernelpick_eager", kernelpick, None)
            if "kernelpick_gated" in modules:
                add("kernelpick_gated_eager", modules["kernelpick_gated"], None)
        if "compiled" in modes:
            add("inductor", plain, "max-autotune-no-cudagraphs")
            add("kernelpick", kernelpick, "default")
            if "kernelpick_fused" in modules:
                add("kernelpick_fused", modules["kernelpick_fused"], "default")
            if "kernelpick_gated" in modules:
                add("kernelpick_gated", modules["kernelpick_gated"], "default")
        if "graph" in modes:
            add("inductor_graph", plain, "max-autotune", graphs=True)
            add("kernelpick_graph", kernelpick, "reduce-overhead", graphs=True)
            if "kernelpick_gated" in modules:
                add("kernelpick_gated_graph", modules["kernelpick_gated"], "reduce-overhead", graphs=True)

        print(f"{label} timing {', '.join(forwards)} ({self.args.rounds} rounds) ...", flush=True)
        for _ in range(self.args.warmup_rounds):  # the GPU's clock up, not timed
            for fn in forwards.values():
                self.do_bench(fn, warmup=25, rep=self.args.rep_ms, return_mode="median")
        samples = self.kernel_ms(forwards)
        ms = {name: statistics.median(s) for name, s in samples.items()}
        replayed_us: dict[str, float] = {}
        for name in dict.fromkeys(n for pair in REPLAYED for n in pair):
            if name in forwards and not self.args.dry:
                try:
                    replayed_us[name] = self.replayed_us(forwards[name])
                except Exception as error:  # reported, not fatal
                    errors[f"{name}_replayed"] = f"{type(error).__name__}: {error}"[:500]
        host_us = {name: self.host_us(fn) for name, fn in forwards.items()}
        print(f"{label} host us per forward: " + ", ".join(f"{k} {v:.1f}" for k, v in host_us.items()))
        back_to_back_us = (
            {}
            if self.args.dry
            else {name: self.back_to_back_us(fn, ms[name]) for name, fn in forwards.items()}
        )
        reference = [o.float() for o in as_tuple(outputs["eager"])]
        largest = max(float(o.abs().max()) for o in reference) or 1.0
        error_vs_eager = {
            name: max(
                float((o.float() - r).abs().max()) for o, r in zip(as_tuple(out), reference, strict=True)
            )
            for name, out in outputs.items()
            if name != "eager"
        }
        floor_us = None if self.args.dry else entry["weight_bytes"] / (self.bandwidth()["peak_gbps"] * 1e3)
        entry.update(
            first_call_s=first,
            kernel_ms_rounds=samples,
            kernel_ms=ms,
            host_us=host_us,
            back_to_back_us=back_to_back_us,
            noise=abs(ms["eager"] - ms["eager_again"]) / min(ms["eager"], ms["eager_again"]),
            speedup={
                name: {base: ms[base] / ms[name] for base in BASELINES if base in ms}
                for name in KERNELPICK
                if name in ms
            },
            replayed_us=replayed_us,
            replayed_speedup={
                name: replayed_us[base] / replayed_us[name]
                for name, base in REPLAYED
                if name in replayed_us and base in replayed_us
            },
            hbm_floor_us=floor_us,
            floor_fraction={} if floor_us is None else {n: floor_us / (1e3 * v) for n, v in ms.items()},
            replayed_floor_fraction=(
                {} if floor_us is None else {n: floor_us / v for n, v in replayed_us.items()}
            ),
            picks=picks,
            max_abs_error_vs_eager=error_vs_eager,
            max_abs_error_vs_eager_relative={name: e / largest for name, e in error_vs_eager.items()},
            eager_max_abs=largest,
            errors=errors,
        )
        return entry

    def replayed_us(self, fn: Callable[[], Any]) -> float:
        """Device microseconds per forward of `REPLAY_FORWARDS` forwards captured in one CUDA graph
        (`common.graph_of`), the median of `REPLAYS` replays."""
        torch = self.torch
        graph = graph_of(fn, REPLAY_FORWARDS, warmups=2)
        graph.replay()
        self.sync()
        times = []
        for _ in range(REPLAYS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(float(start.elapsed_time(end)) * 1e3 / REPLAY_FORWARDS)
        del graph
        return statistics.median(times)

    def host_us(self, fn: Callable[[], Any], calls: int = 200) -> float:
        """Host microseconds per call of `calls` back-to-back calls (the GPU synchronized before and
        after, not counted): launching, not running."""
        self.sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        host = time.perf_counter() - start
        self.sync()
        return host / calls * 1e6

    def picks(
        self, known: set[Any], m: int, projections: dict[tuple[int, int], tuple[str, ...]]
    ) -> dict[str, Any]:
        """What `ops.mm` (and `ops.gated_mm`: `gated`) picked for each projection in the selections
        made since `known` (a forward selects each new projection shape once: gate and up share one)."""
        found: dict[str, Any] = {}
        records = [
            (name, key, record)
            for name in SELECTORS
            for key, record in self.kernelpick.ops.selector(name).records.items()
        ]
        for name, key, record in records:
            if (name, key) in known:
                continue
            a, b = record.signature.inputs[:2]
            if a.size[0] != m:
                continue
            names = ("gated",) if name != "mm" else projections.get((b.size[1], a.size[1]), ())
            for projection in names:
                found[projection] = {
                    "shape": [m, b.size[1], a.size[1]],
                    "pick": record.best,
                    "tuning_s": record.seconds,
                    "from_store": record.from_store,
                    "note": record.note,
                    "choices": len(record.results),
                    "failed": sum(not r.result.ok for r in record.candidates),
                }
        return found


def as_tuple(output: Any) -> tuple[Any, ...]:
    return tuple(output) if isinstance(output, (tuple, list)) else (output,)


# -- the report ------------------------------------------------------------------------------------


def summarize(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomeans and worst cases of each kernelpick variant's speedup over each baseline, the worst
    fraction of the HBM floor under CUDA graphs, and the compile seconds of each variant."""
    summary: dict[str, Any] = {"sizes": len(entries)}
    for name in KERNELPICK:
        for base in BASELINES:
            values = [e["speedup"][name][base] for e in entries if base in e["speedup"].get(name, {})]
            if values:
                summary[f"{name}_vs_{base}_geomean"] = geomean(values)
                summary[f"{name}_vs_{base}_min"] = min(values)
    fractions = [
        e["floor_fraction"]["kernelpick_graph"]
        for e in entries
        if "kernelpick_graph" in e.get("floor_fraction", {})
    ]
    summary["kernelpick_graph_floor_fraction_min"] = min(fractions) if fractions else None
    for name, base in REPLAYED:
        values = [e["replayed_speedup"][name] for e in entries if name in e.get("replayed_speedup", {})]
        if values:
            summary[f"{name}_replayed_vs_{base}_replayed_geomean"] = geomean(values)
            summary[f"{name}_replayed_vs_{base}_replayed_min"] = min(values)
        fractions = [
            e["replayed_floor_fraction"][name]
            for e in entries
            if name in e.get("replayed_floor_fraction", {})
        ]
        if fractions:
            summary[f"{name}_replayed_floor_fraction_min"] = min(fractions)
    for name in VARIANTS:
        seconds = [e["first_call_s"][name] for e in entries if name in e["first_call_s"]]
        summary[f"first_call_s_{name}"] = sum(seconds) if seconds else None
    return summary


def print_table(entries: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    names = [n for n in VARIANTS if any(n in e["kernel_ms"] for e in entries)]
    pairs = [(kp, base) for base, kp in MODES.values() if kp in names and base in names]
    header = (
        f"{'model':>5} {'block':>5} {'M':>5} | "
        + " ".join(f"{n + ' us':>{max(9, len(n) + 3)}}" for n in names)
        + " | "
        + " ".join(f"{kp.removeprefix('kernelpick') or '_compiled':>9}" for kp, _ in pairs)
        + f" {'noise':>6} | picks"
    )
    print(header)
    print("-" * len(header))

    def cell(value: float | None, width: int, digits: int) -> str:
        return f"{'-' if value is None else f'{value:.{digits}f}':>{width}}"

    order = {block: i for i, block in enumerate(BLOCKS)}
    for e in sorted(entries, key=lambda e: (e["hidden"], order.get(e.get("block", "mlp"), 0), e["m"])):
        speedup = e["speedup"]
        picks = next(iter(e["picks"].values()), {})
        print(
            f"{e['model']:>5} {e.get('block', 'mlp'):>5} {e['m']:>5} | "
            + " ".join(
                cell(None if n not in e["kernel_ms"] else 1e3 * e["kernel_ms"][n], max(9, len(n) + 3), 1)
                for n in names
            )
            + " | "
            + " ".join(cell(speedup.get(kp, {}).get(base), 9, 3) for kp, base in pairs)
            + f" {100 * e['noise']:>5.1f}% | "
            + ", ".join(f"{p} {v['pick'][:28]}" for p, v in picks.items())
        )
        for name, error in e["errors"].items():
            print(f"      {name} failed: {error[:200]}")
    print()
    for kp, base in pairs:
        print(
            f"{kp} against {base}: geomean {summary.get(f'{kp}_vs_{base}_geomean')}, "
            f"worst {summary.get(f'{kp}_vs_{base}_min')}"
        )
    replayed = [e for e in entries if e.get("replayed_us")]
    if replayed:
        print("\ncaptured whole in a CUDA graph by hand, device us per forward (HBM floor fraction):")
        for e in sorted(replayed, key=lambda e: (e["hidden"], order.get(e.get("block", "mlp"), 0), e["m"])):
            fractions = e.get("replayed_floor_fraction", {})
            print(
                f"{e['model']:>5} {e.get('block', 'mlp'):>5} {e['m']:>5} | "
                + "  ".join(
                    f"{n} {us:.1f}" + (f" ({fractions[n]:.2f})" if n in fractions else "")
                    for n, us in e["replayed_us"].items()
                )
            )
        for name, base in REPLAYED:
            key = f"{name}_replayed_vs_{base}_replayed"
            if f"{key}_geomean" in summary:
                print(f"{key}: geomean {summary[f'{key}_geomean']}, worst {summary[f'{key}_min']}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    begun = time.perf_counter()
    caches = fresh_caches(args)  # before torch is imported
    todo = [(model, block, m) for model, m in sizes(args.sizes, args.dry) for block in args.blocks]
    bench = BlockBench(args)
    here = environment()
    here.update(
        kernelpick=bench.kernelpick.__version__,
        caches=caches or "warm",
        settings={
            "rounds": args.rounds,
            "warmup_rounds": args.warmup_rounds,
            "rep_ms": args.rep_ms,
            "dry": args.dry,
            "blocks": args.blocks,
            "modes": args.modes,
            "fused_gate_up": args.fused_gate_up,
            "gated": args.gated,
            # What the compiled graph runs for a projection: the pick itself (all; library: only
            # library picks) or the operator, which selects when it runs (off).
            "compiled_picks": bench.kernelpick.settings.current().compiled_picks,
            "ops_fusion": bench.kernelpick.settings.current().ops_fusion,
        },
    )
    slug = "dry" if args.dry else device_slug(here["device"])
    folder = args.out or RESULTS
    path = folder / f"llama_mlp-{slug}.json"
    results: dict[str, Any] = {} if args.fresh or not path.exists() else json.loads(path.read_text())
    runs = results.setdefault("runs", [])
    runs.append(here)
    entries = {(e["model"], e.get("block", "mlp"), e["m"]): e for e in results.get("sizes", [])}
    models = DRY_MODELS if args.dry else MODELS

    def save() -> Path:
        results["sizes"] = list(entries.values())
        results["summary"] = summarize(results["sizes"])
        results["environment"] = here  # this run's: write_result names the file by its device
        if args.out is None and not args.dry:
            return write_result("llama_mlp", results)
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1, default=str) + "\n")
        return path

    longest, left = 0.0, []
    for index, (model, block, m) in enumerate(todo):
        elapsed = time.perf_counter() - begun
        if index and elapsed + longest + RESERVE_S > args.budget_s:
            left = todo[index:]
            break
        started = time.perf_counter()
        entry = bench.size(model, block, m, *models[model])
        entry["run"] = len(runs) - 1
        entry["wall_s"] = time.perf_counter() - started
        longest = max(longest, entry["wall_s"])
        entries[(model, block, m)] = entry
        save()  # after every size: a run cut short keeps what it measured
    results["left"] = [f"{model}:{block}:{m}" for model, block, m in left]
    written = save()
    print(f"\nwrote {written} ({time.perf_counter() - begun:.0f} s)")
    print_table(results["sizes"], results["summary"])
    if left:
        print(
            f"\nnot started within --budget-s {args.budget_s:.0f} (model:block:M): {', '.join(results['left'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
