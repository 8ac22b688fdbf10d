"""Where the host time of an eager `kernelpick.ops` call goes over its pick, step by step (issue 38 item 1).

`bench/op_overhead.py` measures, on a GPU, eager `ops.mm`, `ops.scaled_mm` and `ops.gated_mm` against
their picks called directly; this script says what that difference is made of, on any device. Each
operation's selector is handed a stand-in pick for the inputs below (a function that returns a
preallocated output: no tuning, no kernel, no launch), so that

  op          the eager call, `ops.mm(a, b)` (what a model calls)
  hot path    the selector's positional hot path the operation calls (`kernelpick.ops.gemm._hot`)
  pick        the stand-in called directly (what `ops.selector(name).implementation(...)` gives)

differ only by kernelpick's own work. Then each step that work can take is timed alone, in a loop of
local variables as the eager path has them (the empty loop's time taken off): the operation's
checks, its selector's name, the hot path's places (three integers read from each tensor), its front
lookup, Dynamo's guard and the call of the pick. Not every step is on every call's path: the grad
test, for one, runs only where the front misses (`Selector.positional`'s `differentiable`). Every figure is the median (and least) of `--repeats`
samples of `--calls` calls, the variants taking turns sample by sample.

Inputs: 16x256 by 256x256 (`w.t()`, as `nn.Linear` stores it), bf16 (fp8 with one-element float32
scales, one tensor for both, for scaled_mm), on `--device` (default: cuda if there is one, else cpu).

Run: PYTHONPATH=src python bench/eager_path.py [--calls 100000] [--repeats 9] [--device cpu] [--out DIR | --no-write]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, write_result


def loop(statement: str, names: dict[str, Any]) -> Callable[[int], None]:
    """`statement` run `n` times with `names` as local variables (as in the eager path's functions)."""
    parameters = ", ".join(names)
    source = f"def run(_n, {parameters}):\n    for _ in range(_n):\n        {statement}\n"
    scope: dict[str, Any] = {}
    exec(compile(source, f"<loop of {statement}>", "exec"), scope)
    run = scope["run"]
    values = tuple(names.values())
    return lambda n: run(n, *values)


def per_call_ns(loops: dict[str, Callable[[int], None]], calls: int, repeats: int) -> dict[str, list[float]]:
    """Nanoseconds per call of each loop, less the empty loop's: `repeats` samples of `calls` each,
    the loops taking turns sample by sample (drift falls on all alike)."""
    empty = loop("pass", {"unused": None})
    everything = {"(empty loop)": empty, **loops}
    for run in everything.values():
        run(min(calls, 1000))  # warm-up: caches, the front, the interpreter's specializations
    samples: dict[str, list[float]] = {name: [] for name in everything}
    gc.disable()
    try:
        for _ in range(repeats):
            for name, run in everything.items():
                start = time.perf_counter()
                run(calls)
                samples[name].append((time.perf_counter() - start) / calls * 1e9)
    finally:
        gc.enable()
    floor = statistics.median(samples.pop("(empty loop)"))
    return {name: [s - floor for s in values] for name, values in samples.items()}


def places(names: list[str]) -> str:
    """The hot path's front key of these tensors, as `kernelpick.engine.signature` writes it."""
    return "(" + ", ".join(f"{x}.numel(), {x}.storage_offset(), {x}.data_ptr() & 15" for x in names) + ",)"


def operations(device: str) -> dict[str, dict[str, Any]]:
    """Per operation: its call, the names its statements use, the stand-in pick installed for its
    inputs, and the steps its eager path may take (label: statement)."""
    from kernelpick import ops
    from kernelpick.bench.verify import tf32_allowed
    from kernelpick.engine.signature import signature_key
    from kernelpick.ops import gemm
    from kernelpick.ops.scaled_mm import _NAMES, selector_name
    from kernelpick.select.selector_op import dispatch_modes, dynamo_tracing

    a = torch.randn(16, 256, device=device).to(torch.bfloat16)
    w, u = (torch.randn(256, 256, device=device).to(torch.bfloat16) for _ in range(2))
    b, up = w.t(), u.t()
    a8, b8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device)
    made = {
        "mm": ("mm", ops.mm, (a, b), {}),
        "scaled_mm": (
            selector_name(torch.bfloat16),
            ops.scaled_mm,
            (a8, b8, one, one),
            {"out_dtype": torch.bfloat16},
        ),
        "gated_mm": ("gated_mm_silu", ops.gated_mm, (a, b, up), {}),
    }

    found: dict[str, dict[str, Any]] = {}
    for op, (name, call, inputs, kwargs) in made.items():
        out = torch.empty(16, 256, device=device, dtype=torch.bfloat16)

        def pick(*inputs: Any, out: torch.Tensor = out) -> torch.Tensor:
            return out

        selector = ops.selector(name)
        selector._calls[signature_key(inputs, {}, None)] = pick  # the stand-in, as a tuning would bind it
        for _ in range(3):
            assert call(*inputs, **kwargs) is out  # the first call puts the pick in front
        hot = gemm._hot[name]
        (check, _), *more = selector._calls.front.values()
        assert not more
        tensors = [f"x{i}" for i in range(len(inputs))]
        arguments = ", ".join(tensors)
        names: dict[str, Any] = dict(zip(tensors, inputs))
        names.update(
            op=call,
            hot=hot,
            pick=pick,
            noop=eval(f"lambda {arguments}: None"),  # a function of the operation's parameters
            dynamo_tracing=dynamo_tracing,
            dispatch_modes=dispatch_modes,
            grad_enabled=torch._C.is_grad_enabled,
            tf32_allowed=tf32_allowed,
            F32=torch.float32,
            Tensor=torch.Tensor,
            hot_paths=gemm._hot,
            front_get=selector._calls.front.get,
            front_key=eval(places(tensors), {}, dict(zip(tensors, inputs))),
            check=check,
            names=_NAMES,
            out_dtype=torch.bfloat16,
        )
        keywords = ", out_dtype=out_dtype" if kwargs else ""
        steps = {
            "a Python function's call (one frame)": f"noop({arguments})",
            "dynamo_tracing()": "dynamo_tracing()",
            "dispatch_modes()": "dispatch_modes()",
        }
        if kwargs:  # scaled_mm: no gradients; its selector by output dtype, bias and accumulation
            steps["selector name"] = "names.get((out_dtype, False, False))"
        else:
            requiring = " or ".join(f"{x}.requires_grad" for x in tensors)
            steps["grad mode and requires_grad (grad on)"] = f"grad_enabled() and ({requiring})"
            steps["selector name"] = (
                "'tf32' if x1.dtype is F32 and x1.is_cuda and tf32_allowed() else 'plain'"
            )
        steps.update(
            {
                "hot path lookup (_hot.get)": f"hot_paths.get({name!r})",
                "plain-tensor test": " and ".join(f"type({x}) is Tensor" for x in tensors),
                "places (3 reads a tensor)": places(tensors),
                "front lookup": "front_get(front_key)",
                "guard (Dynamo's TensorGuards)": f"check({arguments})",
                "the pick's call (stand-in)": f"pick({arguments})",
            }
        )
        found[op] = {
            "selector": name,
            "names": names,
            "statements": {
                "op": f"op({arguments}{keywords})",
                "hot path": f"hot({arguments})",
                "pick": f"pick({arguments})",
                **steps,
            },
        }
    return found


def measure(device: str, calls: int, repeats: int) -> dict[str, Any]:
    from kernelpick import settings

    with settings.override(no_tuning=True):  # nothing tunes here: no workers start for it, on a GPU either
        found = operations(device)
    loops = {
        f"{op}/{label}": loop(statement, parts["names"])
        for op, parts in found.items()
        for label, statement in parts["statements"].items()
    }
    samples = per_call_ns(loops, calls, repeats)
    medians = {
        op: {label: statistics.median(samples[f"{op}/{label}"]) for label in found[op]["statements"]}
        for op in found
    }
    least = {op: {label: min(samples[f"{op}/{label}"]) for label in found[op]["statements"]} for op in found}
    extra = {
        op: {
            "op - pick": figures["op"] - figures["pick"],
            "hot path - pick": figures["hot path"] - figures["pick"],
            "op - hot path": figures["op"] - figures["hot path"],
        }
        for op, figures in medians.items()
    }
    return {
        "device": device,
        "calls_per_sample": calls,
        "repeats": repeats,
        "selectors": {op: parts["selector"] for op, parts in found.items()},
        "statements": {op: parts["statements"] for op, parts in found.items()},
        "median_ns": medians,
        "least_ns": least,
        "extra_ns": extra,
        "note": "a stand-in pick returning a preallocated output; the empty loop's time is taken off each figure",
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"per-call host time on {result['device']}, ns: median (least) of {result['repeats']} samples of "
        f"{result['calls_per_sample']} calls"
    ]
    for op, figures in result["median_ns"].items():
        lines.append(f"{op} (selector {result['selectors'][op]}):")
        for label, value in figures.items():
            lines.append(f"  {label:<42} {value:8.0f} ({result['least_ns'][op][label]:6.0f})")
        for name, value in result["extra_ns"][op].items():
            lines.append(f"  extra: {name:<35} {value:+8.0f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100_000, help="calls per sample (default 100000)")
    parser.add_argument("--repeats", type=int, default=9, help="samples per variant (default 9)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--out", type=Path, default=None, help="folder of the results file (default: bench/results)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    result = {"environment": environment(), **measure(args.device, args.calls, args.repeats)}
    if not args.no_write:
        print(f"wrote {write_result('eager_path', result, args.out)}")
    print(table(result))


if __name__ == "__main__":
    main()
