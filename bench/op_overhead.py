"""Per-call host time of a `kernelpick.op` against calling its function directly, eager and compiled (issue 6).

On a small problem (a vector add of N elements, one launch), each variant is called in a loop and
the wall time per call is taken after a final synchronize; the GPU kernel is far shorter than the
host work, so this is the host cost of a call. Variants take turns sample by sample. Variants:

  eager
    direct        the user's function called directly: torch.empty_like + add_kernel[grid](...)
    raw launch    add_kernel[grid](...) alone, output preallocated (the floor)
    kernelpick.op the operator, eager fast path (dispatcher skipped when nothing traces)
    torch.ops     the same operator through PyTorch's dispatcher (torch.ops.<ns>.<name>)
    triton_op     torch.library.triton_op + wrap_triton, PyTorch's own way (for reference)
    in place: direct vs kernelpick.op for x += 1 (the op also bumps x's version counter)
  compiled (torch.compile, default Inductor backend, fullgraph=True)
    direct        a compiled function launching the kernel itself (Dynamo's user-kernel support)
    kernelpick.op a compiled function calling the operator

  no kernel (also on CPU): the same three ways of calling functions that allocate (or write in
    place) without launching anything: the wrapper's own cost, free of launch-time noise.
  selection (also on CPU): a `Selector` of two externs (`torch.add`, a closure) as an operator
    (`selector.as_op`), what a compiled program calls for `kernelpick.ops.mm` and the like:
    direct        torch.add itself
    selector      the selector's eager hot path
    torch.ops     its operator through PyTorch's dispatcher (kernelpick's registration)
    custom_op     the same selector registered with `torch.library.custom_op` (how kernelpick
                  registered selections before 2026-11-26), for comparison in the same run
  ops (GPU): `kernelpick.ops.mm` (bf16), `ops.scaled_mm` (fp8, per-tensor scales) and `ops.gated_mm`
    (bf16, silu) at 16x256x256,
    a launch-bound decode size, each against its pick called directly (what the selector's hot path
    calls: `ops.selector(name).implementation(...)`); issue 38's target: <= +1 us
  compiled selection (also on CPU): a 64x64 product compiled (default Inductor backend) as
    torch.mm, as kernelpick.ops.mm (the graph runs the pick where KERNELPICK_COMPILED_PICKS lets
    it: `compiled_mm_pick` says what it is), and as ops.mm compiled with the setting off (the
    graph calls the operator, which selects on every call)

Without a GPU only the no-kernel variants run (Triton's interpreter would dwarf everything). Writes bench/results/op_overhead-<device>.json and
prints a table last.

Run: PYTHONPATH=src python bench/op_overhead.py [--n 4096] [--calls 2000] [--repeats 25]
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

import torch  # at module level: the operators' annotations name it

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, write_result

TARGET_EXTRA_US = 5.0


def per_call_us(
    variants: dict[str, Callable[[], Any]], calls: int, repeats: int, sync: Callable[[], None]
) -> dict[str, list[float]]:
    """Microseconds per call of each variant: `repeats` samples of `calls` back-to-back calls each.

    The variants take turns sample by sample (interleaved), so that drift in clocks or load during
    the run falls on all of them alike.
    """
    for call in variants.values():  # warm-up: compilation, caches, the allocator
        for _ in range(min(calls, 200)):
            call()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    gc.disable()
    try:
        for repeat in range(repeats):
            names = list(variants)
            names = names[repeat % len(names) :] + names[: repeat % len(names)]  # rotate the order
            for name in names:
                call = variants[name]
                sync()
                start = time.perf_counter()
                for _ in range(calls):
                    call()
                sync()
                samples[name].append((time.perf_counter() - start) / calls * 1e6)
    finally:
        gc.enable()
    return samples


def build(device: str) -> dict[str, Any]:
    """The kernels, the operators and the functions under test."""
    import triton
    import triton.language as tl

    import kernelpick

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + tl.load(y_ptr + offsets, mask=mask), mask=mask)

    @triton.jit
    def increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out

    def increment_(x: torch.Tensor) -> None:
        n = x.numel()
        increment_kernel[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)

    def nothing(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # the CPU stand-in: no launch
        return torch.empty_like(x)

    def nothing_(x: torch.Tensor) -> None:  # the CPU stand-in of an in-place kernel: a cheap write
        x.zero_()

    def closure_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y

    selector = kernelpick.Selector(
        f"bench_overhead_add_{device}", [kernelpick.extern(torch.add), kernelpick.extern(closure_add)]
    )
    custom_op = torch.library.custom_op(
        f"bench_overhead::selection_custom_op_{device}",
        lambda x, y: selector(x, y),
        mutates_args=(),
        schema="(Tensor x, Tensor y) -> Tensor",
    )
    custom_op.register_fake(lambda x, y: torch.empty_like(x))
    parts: dict[str, Any] = {
        "selector": selector,
        "selector_op": selector.as_op(
            f"bench_overhead::selection_{device}", schema="(Tensor x, Tensor y) -> Tensor"
        ),
        "selection_custom_op": custom_op,
        "add_kernel": add_kernel,
        "add": add,
        "increment_": increment_,
        "nothing": nothing,
        "nothing_": nothing_,
        "op_nothing": kernelpick.op(f"bench_overhead::nothing_{device}")(nothing),
        "op_nothing_": kernelpick.op(f"bench_overhead::nothing__{device}")(nothing_),
    }
    if device == "cuda":
        parts["op_add"] = kernelpick.op("bench_overhead::add")(add)
        parts["op_increment_"] = kernelpick.op("bench_overhead::increment_")(increment_)

        from torch.library import triton_op, wrap_triton

        @triton_op("bench_overhead::triton_op_add", mutates_args=())
        def triton_op_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            n = x.numel()
            wrap_triton(add_kernel)[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
            return out

        parts["triton_op_add"] = triton_op_add
    return parts


def compiled_products(device: str) -> dict[str, Any]:
    """Compiled functions of one 64x64 product: `torch.mm`; `kernelpick.ops.mm`, whose graph runs the
    pick itself where it may (KERNELPICK_COMPILED_PICKS); the same compiled with the setting off, so
    that the graph calls the operator, which selects on every call. And `ops.mm`'s pick."""
    from kernelpick import ops, settings

    a, b = torch.randn(64, 64, device=device), torch.randn(64, 64, device=device)
    ops.mm(a, b)  # tunes
    direct = torch.compile(lambda p, q: torch.mm(p, q), fullgraph=True)
    picked = torch.compile(lambda p, q: ops.mm(p, q), fullgraph=True)
    node = torch.compile(lambda p, q: ops.mm(p, q), fullgraph=True)  # another code object, compiled apart
    # Compiled with Inductor's caches off: the two graphs of ops.mm share a cache key (it knows no pick).
    with (
        torch._inductor.config.patch(fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
    ):
        with settings.override(compiled_picks="off"):
            torch.testing.assert_close(node(a, b), a @ b)
        for fn in (direct, picked):
            torch.testing.assert_close(fn(a, b), a @ b)
    pick = ops.selector("mm").implementation(a, b)
    return {
        "pick": getattr(pick, "__qualname__", repr(pick)),
        "variants": {
            "torch.mm": lambda: direct(a, b),
            "ops.mm": lambda: picked(a, b),
            "ops.mm node": lambda: node(a, b),
        },
    }


def ops_calls() -> dict[str, Any]:
    """Eager `ops.mm`, `ops.scaled_mm` and `ops.gated_mm` at a launch-bound size, each tuned, beside its
    pick called directly, and the picks' names."""
    from kernelpick import ops
    from kernelpick.ops.scaled_mm import selector_name

    a = torch.randn(16, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    product, scaled = ops.mm(a, w.t()), ops.scaled_mm(a8, w8.t(), one, one, out_dtype=torch.bfloat16)
    mm_selector = ops.selector("mm")
    scaled_selector = ops.selector(selector_name(torch.bfloat16))
    mm_pick = mm_selector.implementation(a, w.t())
    scaled_pick = scaled_selector.implementation(a8, w8.t(), one, one)
    torch.testing.assert_close(mm_pick(a, w.t()), product)
    torch.testing.assert_close(scaled_pick(a8, w8.t(), one, one), scaled)
    b, b8 = w.t(), w8.t()
    u = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16).t()
    gated = ops.gated_mm(a, b, u)
    gated_selector = ops.selector("gated_mm_silu")
    gated_pick = gated_selector.implementation(a, b, u)
    torch.testing.assert_close(gated_pick(a, b, u), gated)
    return {
        "picks": {
            "mm": mm_selector.tune(a, b).best,
            "scaled_mm": scaled_selector.tune(a8, b8, one, one).best,
            "gated_mm": gated_selector.tune(a, b, u).best,
        },
        "variants": {
            "ops/mm pick": lambda: mm_pick(a, b),
            "ops/ops.mm": lambda: ops.mm(a, b),
            "ops/scaled_mm pick": lambda: scaled_pick(a8, b8, one, one),
            "ops/ops.scaled_mm": lambda: ops.scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16),
            "ops/gated_mm pick": lambda: gated_pick(a, b, u),
            "ops/ops.gated_mm": lambda: ops.gated_mm(a, b, u),
        },
    }


def measure(n: int, calls: int, repeats: int) -> dict[str, Any]:
    import triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    parts = build(device)
    x = torch.randn(n, device=device)
    y = torch.randn(n, device=device)
    out = torch.empty_like(x)
    nothing, op_nothing, nothing_, op_nothing_ = (
        parts["nothing"],
        parts["op_nothing"],
        parts["nothing_"],
        parts["op_nothing_"],
    )
    op_nothing(x, y)
    op_nothing_(x.clone())
    selector, selector_op, custom_op = parts["selector"], parts["selector_op"], parts["selection_custom_op"]
    selector(x, y)  # tunes: the variants below take the hot path
    compiled_mm = compiled_products(device)
    variants: dict[str, Callable[[], Any]] = {
        "eager/no kernel direct": lambda: nothing(x, y),
        "eager/no kernel kernelpick.op": lambda: op_nothing(x, y),
        "eager/no kernel torch.ops": lambda: op_nothing.overload(x, y),
        "eager/no kernel in place direct": lambda: nothing_(x),
        "eager/no kernel in place kernelpick.op": lambda: op_nothing_(x),
        "eager/no kernel in place torch.ops": lambda: op_nothing_.overload(x),
        "selection/direct": lambda: torch.add(x, y),
        "selection/selector": lambda: selector(x, y),
        "selection/torch.ops": lambda: selector_op.overload(x, y),
        "selection/custom_op": lambda: custom_op(x, y),
        **{f"compiled selection/{name}": call for name, call in compiled_mm["variants"].items()},
    }
    ops_part: dict[str, Any] = {}
    if device == "cuda":
        add, op_add, increment_, op_increment_ = (
            parts["add"],
            parts["op_add"],
            parts["increment_"],
            parts["op_increment_"],
        )
        torch.testing.assert_close(op_add(x, y), x + y)  # the operators compute what the functions do
        torch.testing.assert_close(op_add.overload(x, y), x + y)
        op_increment_(x.clone())
        overload_add, overload_increment_ = op_add.overload, op_increment_.overload
        add_kernel = parts["add_kernel"]
        grid = (triton.cdiv(n, 1024),)
        compiled_direct = torch.compile(lambda a, b: add(a, b), fullgraph=True)
        compiled_op = torch.compile(lambda a, b: op_add(a, b), fullgraph=True)
        torch.testing.assert_close(compiled_op(x, y), x + y)
        torch.testing.assert_close(compiled_direct(x, y), x + y)
        ops_part = ops_calls()
        variants.update(ops_part["variants"])
        variants.update(
            {
                "eager/raw launch": lambda: add_kernel[grid](x, y, out, n, BLOCK=1024),
                "eager/direct": lambda: add(x, y),
                "eager/kernelpick.op": lambda: op_add(x, y),
                "eager/torch.ops": lambda: overload_add(x, y),
                "eager/triton_op": lambda: parts["triton_op_add"](x, y),
                "eager/in place direct": lambda: increment_(x),
                "eager/in place kernelpick.op": lambda: op_increment_(x),
                "eager/in place torch.ops": lambda: overload_increment_(x),
                "compiled/direct": lambda: compiled_direct(x, y),
                "compiled/kernelpick.op": lambda: compiled_op(x, y),
            }
        )

    samples = per_call_us(variants, calls, repeats, sync)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    extra = {
        "no kernel: op - direct": medians["eager/no kernel kernelpick.op"]
        - medians["eager/no kernel direct"],
        "no kernel: torch.ops - direct": medians["eager/no kernel torch.ops"]
        - medians["eager/no kernel direct"],
        "no kernel, in place: op - direct": medians["eager/no kernel in place kernelpick.op"]
        - medians["eager/no kernel in place direct"],
        "selection: selector - direct": medians["selection/selector"] - medians["selection/direct"],
        "selection: torch.ops - direct": medians["selection/torch.ops"] - medians["selection/direct"],
        "selection: custom_op - direct": medians["selection/custom_op"] - medians["selection/direct"],
        "compiled ops.mm - compiled torch.mm": medians["compiled selection/ops.mm"]
        - medians["compiled selection/torch.mm"],
        "compiled ops.mm node - compiled torch.mm": medians["compiled selection/ops.mm node"]
        - medians["compiled selection/torch.mm"],
    }
    headline = "no kernel: op - direct"
    if device == "cuda":
        headline = "eager op - direct"
        extra.update(
            {
                "eager op - direct": medians["eager/kernelpick.op"] - medians["eager/direct"],
                "eager torch.ops - direct": medians["eager/torch.ops"] - medians["eager/direct"],
                "eager triton_op - direct": medians["eager/triton_op"] - medians["eager/direct"],
                "eager in place op - direct": medians["eager/in place kernelpick.op"]
                - medians["eager/in place direct"],
                "compiled op - compiled direct": medians["compiled/kernelpick.op"]
                - medians["compiled/direct"],
                "eager ops.mm - its pick": medians["ops/ops.mm"] - medians["ops/mm pick"],
                "eager ops.scaled_mm - its pick": medians["ops/ops.scaled_mm"]
                - medians["ops/scaled_mm pick"],
                "eager ops.gated_mm - its pick": medians["ops/ops.gated_mm"] - medians["ops/gated_mm pick"],
            }
        )
    return {
        "device": device,
        "n": n,
        "compiled_mm_pick": compiled_mm["pick"],
        "ops_picks": ops_part["picks"] if device == "cuda" else None,
        "calls_per_sample": calls,
        "samples_us": samples,
        "median_us": medians,
        "extra_us": extra,
        "target_extra_eager_us": TARGET_EXTRA_US,
        "headline": headline,
        "meets_target": extra[headline] <= TARGET_EXTRA_US,
        "note": (
            "GPU: host time per call of a vector add, kernel included; 'no kernel' variants: functions that "
            "allocate (or write) without launching, the wrapper's own cost"
            if device == "cuda"
            else "CPU: only functions that launch nothing (Triton's interpreter would dominate everything); "
            "the op's CPU path also routes launches to the interpreter around each call"
        ),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"per-call host time, n={result['n']} ({result['device']}), median of {result['calls_per_sample']}-call samples"
    ]
    for name, value in result["median_us"].items():
        lines.append(f"  {name:<40} {value:9.2f} us")
    for name, value in result["extra_us"].items():
        lines.append(f"  extra: {name:<33} {value:+9.2f} us")
    verdict = "meets" if result["meets_target"] else "MISSES"
    lines.append(
        f"  eager target <= {result['target_extra_eager_us']} us extra ({result['headline']}): {verdict}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=4096, help="vector length (default 4096)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per sample (default 2000)")
    parser.add_argument("--repeats", type=int, default=25, help="samples per variant (default 25)")
    args = parser.parse_args()
    result = measure(args.n, args.calls, args.repeats)
    path = write_result("op_overhead", {"environment": environment(), **result})
    print(f"wrote {path}")
    print(table(result))


if __name__ == "__main__":
    main()
