# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""kernelpick.autotune vs triton.autotune on real-world kernels (issue 37, item 5): does the drop-in hold?

The cases are those of tests/tune/real_kernels (Triton's tutorials 03, 06, 09 and 10, Tri Dao's Triton
FlashAttention, a flash-linear-attention chunk kernel), each tuned over its source's full config list at
the issue's sizes: 03 fp16 1024^3 and 4096^3; 09's five matmuls fp16 4096^3 and its four persistent and
TMA ones in fp8; 06 causal forward and backward, Z=4 H=32, N_CTX 1024 and 4096 by HEAD_DIM 64 and 128
(and its fp8 forward); 10, flash-attn and fla at their own (tests/tune/real_kernels lists them).

Each case, at each size, runs once per tuner in a fresh process of this script with fresh caches (a
TRITON_CACHE_DIR and a KERNELPICK_CACHE_DIR of its own): the kernels are decorated, the inputs made, the
first call (which tunes) timed, its outputs checked as the kernel's source checks them, and the tuned
call timed with triton.testing.do_bench (median). Per tuner: `ok` (the check passed), `first_call_s`,
`ms`, `picks` (each tuned kernel's name and `best_config` after the first call) and `error` (what failed:
the tuning, the launch, the check, or the process itself), or `skipped` with the reason where the case
cannot run on this GPU; `same_picks` where both tuners ran (the figure `ms` of a call under ~50 us, or of a
call with host work between its kernels, varies from run to run more than two picks differ).

    source bench/gpu_prelude.sh && python3 bench/real_kernels.py
    python3 bench/real_kernels.py --cases 03-,09-matmul_tma --max-sizes 1   # names or their prefixes
    python3 bench/real_kernels.py --tutorials ~/triton/python/tutorials    # Triton's own files

`--tutorials DIR` runs Triton's original tutorial files from DIR instead of our kernels, for the cases that
come from a tutorial with a tuned kernel (03, 06 and 09): kernelpick's process replaces `triton.autotune`
with `kernelpick.autotune` before it runs the file, and records the class of each tuned kernel the file
made (`tuned_by`). The files are not kept here: take 03 and 09 from Triton 3.6's branch point (004d7f5f5)
and 06 from 5c846f015 (its causal fix), e.g. `git show 004d7f5f5:python/tutorials/03-matrix-multiplication.py`.
A tutorial that tests or benchmarks itself at import (03) is run only up to that point.

A process takes 5 to 40 s on an H200 (Triton's side tuning the larger spaces the longest): to stay within
a 10-minute command, split a full run with `--cases` and `--max-sizes`. Results: bench/results/real_kernels-<device>.json (real_kernels-tutorials-...
with --tutorials). `--tiny` runs every case on the CPU in Triton's interpreter at its tiny size with its
small configs, timed with the wall clock: its figures mean nothing (tests/bench_scripts runs it).
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, commit, device_slug, environment, require_kernelpick, wall_clock_ms

TUNERS = ("triton", "kernelpick")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="", help="comma-separated case names or prefixes (default: all)")
    parser.add_argument("--tuners", default=",".join(TUNERS), help="comma-separated: triton, kernelpick")
    parser.add_argument("--max-sizes", type=int, default=0, help="only each case's first N sizes (0: all)")
    parser.add_argument("--tutorials", type=Path, help="run Triton's tutorial files from this folder")
    parser.add_argument(
        "--tiny", action="store_true", help="on the CPU, in Triton's interpreter: a smoke test"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds one tuner's process may take")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the results file")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="keep each process's kernelpick log (INFO, ms since it started) and when each stage began",
    )
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--tuner", help=argparse.SUPPRESS)
    return parser.parse_args()


# -- one tuner, one case, one size: in a fresh process ------------------------------------------


def wall_clock_do_bench(kernel_call: Callable[[], Any], quantiles: Any = None) -> Any:
    """`triton.testing.do_bench(kernel_call, quantiles)` on the CPU's clock: what Triton's autotuner needs
    in the interpreter, where its default needs a GPU."""
    ms = wall_clock_ms(kernel_call)
    return [ms] * len(quantiles) if quantiles else ms


@contextmanager
def tuner_scope(tuner: str, tiny: bool) -> Iterator[None]:
    """Where `triton.autotune` runs on the CPU: Triton's interpreter, as TRITON_INTERPRET=1 makes it
    (kernelpick needs no setting)."""
    if tuner != "triton" or not tiny:
        yield
        return
    import triton

    from kernelpick.compile.launch import interpreting

    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = True
        with interpreting():
            yield


def autotune_for(tuner: str, tiny: bool) -> Any:
    import functools

    import triton

    if tuner == "kernelpick":
        import kernelpick

        return kernelpick.autotune
    return functools.partial(triton.autotune, do_bench=wall_clock_do_bench) if tiny else triton.autotune


def keeping(autotune: Any, made: list[Any]) -> Any:
    """`autotune` that keeps each tuned kernel it makes in `made`: after a call, each one's
    `best_config` (both tuners have it) is its pick."""

    def decorator(*args: Any, **kwargs: Any) -> Any:
        decorate = autotune(*args, **kwargs)

        def decorate_and_keep(fn: Any) -> Any:
            made.append(decorate(fn))
            return made[-1]

        return decorate_and_keep

    return decorator


def picks_of(made: list[Any]) -> list[list[str]]:
    """Each tuned kernel's name and pick (`str` of its `best_config`), of those that ran."""
    return [
        [getattr(kernel.fn, "__name__", "?"), str(kernel.best_config)]
        for kernel in made
        if getattr(kernel, "best_config", None) is not None
    ]


def top_level_prefix(source: str, stop_before: str | None) -> str:
    """`source` up to its first top-level statement that starts with `stop_before` (all of it for None)."""
    if stop_before is None:
        return source
    for node in ast.parse(source).body:
        segment = ast.get_source_segment(source, node) or ""
        if segment.startswith(stop_before):
            return "".join(source.splitlines(keepends=True)[: node.lineno - 1])
    raise ValueError(f"no top-level statement starts with {stop_before!r}")


def load_tutorial(
    folder: Path, file: str, stop_before: str | None, tuner: str, tiny: bool
) -> types.ModuleType:
    """Run Triton's tutorial `file` as a module, `triton.autotune` being kernelpick's for kernelpick (and,
    on the CPU, Triton's with a wall-clock `do_bench` for Triton)."""
    import triton

    path = folder / file
    triton.autotune = autotune_for(tuner, tiny)  # what the tutorial's `@triton.autotune(...)` looks up
    module = types.ModuleType(path.stem.replace("-", "_"))
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    # Compiled with the file's own name: Triton reads each kernel's source from it (lines unchanged).
    exec(compile(top_level_prefix(path.read_text(), stop_before), str(path), "exec"), module.__dict__)
    return module


def tuners_in(module: types.ModuleType) -> list[str]:
    """The classes of the tuned kernels a module defines: evidence of whose `autotune` decorated them."""
    return sorted(
        {
            f"{type(v).__module__}.{type(v).__name__}"
            for v in vars(module).values()
            if hasattr(v, "configs") and hasattr(v, "fn")
        }
    )


def skip_reason(case: Any, tiny: bool, tutorials: bool) -> str | None:
    """Why `case` does not run here (this GPU, the installed Triton's interpreter, no tutorial), or None."""
    reason = case.unsupported("cpu" if tiny else "cuda")
    if reason is None and tutorials and case.tutorial is None:
        reason = "not from a Triton tutorial with a tuned kernel"
    return reason


def role_run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from tests.tune.real_kernels import case_named

    case = case_named(args.case)
    size = json.loads(args.size)
    device = "cpu" if args.tiny else "cuda"
    result: dict[str, Any] = {"ok": False, "first_call_s": None, "ms": None, "error": None}

    def synchronize() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    stage = "decoration"
    made: list[Any] = []  # the tuned kernels the case makes (not kept with --tutorials)
    began = time.perf_counter()
    result["stages_ms"] = stages = {}  # when each stage began, ms since this process's role began
    try:
        with tuner_scope(args.tuner, args.tiny):
            if args.tutorials:
                tutorial = case.tutorial
                assert tutorial is not None
                module = load_tutorial(
                    args.tutorials, tutorial.file, tutorial.stop_before, args.tuner, args.tiny
                )
                operation: Callable[..., Any] = lambda *inputs: tutorial.call(module, inputs)  # noqa: E731
                result["configs"] = "the tutorial's"
                result["tuned_by"] = tuners_in(module)
            else:
                configs = case.tiny_configs() if args.tiny else case.configs()
                operation = case.build(keeping(autotune_for(args.tuner, args.tiny), made), configs)
                result["configs"] = len(configs)
            # Asked after the kernels are made, as programs do (a tutorial defines its kernels at
            # import and checks the GPU when it runs): asking initializes CUDA, and a process that
            # did so before making its first tuned kernel gets no forked zygote (docs/measurement.md).
            reason = skip_reason(case, args.tiny, bool(args.tutorials))
            if reason:
                return {**result, "skipped": reason}
            stage = "inputs"
            stages[stage] = round((time.perf_counter() - began) * 1e3)
            logging.getLogger("real_kernels").info("stage: %s", stage)
            inputs = case.make_inputs(size, device)
            synchronize()
            stage = "first call (tuning)"
            stages[stage] = round((time.perf_counter() - began) * 1e3)
            logging.getLogger("real_kernels").info("stage: %s", stage)
            started = time.perf_counter()
            outputs = operation(*inputs)
            synchronize()
            result["first_call_s"] = time.perf_counter() - started
            result["picks"] = picks_of(made)
            stage = "check"
            stages[stage] = round((time.perf_counter() - began) * 1e3)
            logging.getLogger("real_kernels").info("stage: %s", stage)
            try:
                case.check(inputs, outputs)
                result["ok"] = True
            except AssertionError as failure:
                result["error"] = f"check: {failure}"
            stage = "timing"
            stages[stage] = round((time.perf_counter() - began) * 1e3)
            logging.getLogger("real_kernels").info("stage: %s", stage)
            call = lambda: operation(*inputs)  # noqa: E731
            if args.tiny:
                result["ms"] = wall_clock_ms(call)
            else:
                import triton.testing

                result["ms"] = float(triton.testing.do_bench(call, return_mode="median"))
    except Exception as error:  # what a user would see: the tuner's or the kernel's failure
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        result["error"] = f"{stage}: {text[-6000:]}"
        result["traceback"] = traceback.format_exc()[-6000:]
    return result


# -- orchestration ------------------------------------------------------------------------------


def run_tuner(
    args: argparse.Namespace, case: str, size: dict[str, int], tuner: str, work: Path
) -> dict[str, Any]:
    """One tuner on one case and size, in a fresh process of this script with caches of its own."""
    folder = Path(tempfile.mkdtemp(prefix=f"{tuner}-", dir=work))
    env = {
        key: value for key, value in os.environ.items() if key not in ("PYTEST_VERSION", "TRITON_INTERPRET")
    }
    env.update(
        TRITON_CACHE_DIR=str(folder / "triton-cache"),
        KERNELPICK_CACHE_DIR=str(folder / "kernelpick-cache"),
        KERNELPICK_LOG=str(folder / "tunings.jsonl"),  # where kernelpick's first call spent its seconds
        # The kernelpick this process imports (a PYTHONPATH given first), then this checkout's, and the tests.
        PYTHONPATH=os.pathsep.join(
            filter(None, [os.environ.get("PYTHONPATH"), str(ROOT / "src"), str(ROOT)])
        ),
    )
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--role",
        "run",
        "--case",
        case,
        "--size",
        json.dumps(size),
        "--tuner",
        tuner,
    ]
    if args.tiny:
        command.append("--tiny")
    if args.tutorials:
        command += ["--tutorials", str(args.tutorials.resolve())]
    if args.timeline:
        command.append("--timeline")
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=args.timeout, check=False
        )
    except subprocess.TimeoutExpired as expired:
        stderr = (
            expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr
        )
        return {
            "ok": False,
            "first_call_s": None,
            "ms": None,
            "error": f"process: no result in {args.timeout:.0f} s",
            "stderr": (stderr or "")[-3000:],
        }
    lines = done.stdout.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {
            "ok": False,
            "first_call_s": None,
            "ms": None,
            "error": f"process: exited with {done.returncode} and no result",
            "stderr": done.stderr[-3000:],
        }
    result["process_s"] = time.perf_counter() - started
    if args.timeline:
        result["log"] = done.stderr[-8000:]
    if tuner == "kernelpick":
        result["tunings"] = tunings_in(folder / "tunings.jsonl")
    return result


def tunings_in(log: Path) -> list[dict[str, Any]]:
    """Each tuning of kernelpick's first call, from its tuning log: the kernel, its seconds and their
    phases, and how many configs it measured and how many failed (what a slow first call spent)."""
    if not log.exists():
        return []
    tunings = []
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        candidates = entry.get("candidates") or []
        tunings.append(
            {
                "name": entry.get("name"),
                "seconds": entry.get("seconds"),
                "phases": entry.get("phases"),
                "configs": len(candidates),
                "failed": sum(1 for c in candidates if c.get("status") not in ("ok", None)),
                "compile_s": sum(c.get("compile_s") or 0.0 for c in candidates),
                "best": entry.get("best"),
                "fastest": sorted(
                    (c["cost_ms"], c["name"]) for c in candidates if c.get("cost_ms") is not None
                )[:4],
            }
        )
    return tunings


def selected(names: list[str], wanted: str) -> list[str]:
    if not wanted:
        return names
    prefixes = [w.strip() for w in wanted.split(",") if w.strip()]
    chosen = [name for name in names if any(name == p or name.startswith(p) for p in prefixes)]
    if not chosen:
        raise SystemExit(f"--cases {wanted!r} names no case; the cases: {', '.join(names)}")
    return chosen


def cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    if result.get("skipped"):
        return "skipped"
    first = f"{result['first_call_s']:.1f} s" if result.get("first_call_s") is not None else "-"
    ms = f"{result['ms']:.3f} ms" if result.get("ms") is not None else "-"
    return f"{'ok' if result['ok'] else 'FAILED'} {first} {ms}"


def save(report: dict[str, Any], folder: Path, tutorials: bool) -> Path:
    name = "real_kernels-tutorials" if tutorials else "real_kernels"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{device_slug(report['environment']['device'])}.json"
    text = json.dumps(report, indent=2, default=str) + "\n"
    path.write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], path.name).write_text(text)
    return path


def main() -> int:
    args = parse()
    if args.role:
        if args.timeline:
            logging.basicConfig(
                level=logging.INFO,
                format="%(relativeCreated)7.0f ms %(name)s: %(message)s",
                stream=sys.stderr,
            )
        sys.path += [str(ROOT / "src"), str(ROOT)]  # after a PYTHONPATH given: the kernelpick it names
        print(json.dumps(role_run(args), default=str))
        return 0
    require_kernelpick()
    sys.path.insert(0, str(ROOT))
    from tests.tune.real_kernels import CASES, case_named

    if args.tutorials and not args.tutorials.is_dir():
        raise SystemExit(f"--tutorials {args.tutorials}: not a folder (Triton's python/tutorials)")
    tuners = [t.strip() for t in args.tuners.split(",") if t.strip()]
    if not tuners or set(tuners) - set(TUNERS):
        raise SystemExit(f"--tuners {args.tuners!r}: give triton, kernelpick or both")
    names = selected([case.name for case in CASES], args.cases)
    work = Path(tempfile.mkdtemp(prefix="kp-real-kernels-"))
    report: dict[str, Any] = {
        "environment": {**environment(), "kernelpick_commit": commit()},
        "settings": {
            "tiny": args.tiny,
            "tutorials": str(args.tutorials) if args.tutorials else None,
            "timer": "wall clock (interpreter)" if args.tiny else "triton.testing.do_bench median",
        },
        "cases": [],
    }
    for name in names:
        case = case_named(name)
        sizes = [case.tiny_size] if args.tiny else list(case.sizes)
        reason = skip_reason(case, args.tiny, bool(args.tutorials))
        for size in sizes[: args.max_sizes or None]:
            entry: dict[str, Any] = {"case": name, "size": dict(size)}
            for tuner in tuners:
                entry[tuner] = (
                    {"ok": False, "first_call_s": None, "ms": None, "error": None, "skipped": reason}
                    if reason
                    else run_tuner(args, name, dict(size), tuner, work)
                )
            picks = [entry[t].get("picks") for t in TUNERS if t in entry]
            if len(picks) == 2 and all(picks):
                entry["same_picks"] = picks[0] == picks[1]
            report["cases"].append(entry)
            path = save(
                report, args.out, bool(args.tutorials)
            )  # after each: a run cut short keeps its results
            shown = ",".join(f"{k}={v}" for k, v in size.items())
            print(f"{name} [{shown}]: " + "; ".join(f"{t} {cell(entry.get(t))}" for t in tuners), flush=True)
            if "same_picks" in entry:
                print(f"    same picks: {entry['same_picks']}", flush=True)
            if reason:
                print(f"    skipped: {reason}", flush=True)
            for tuner in tuners:
                if entry[tuner].get("error"):
                    print(f"    {tuner}: {entry[tuner]['error'][:400]}", flush=True)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
