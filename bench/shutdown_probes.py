"""How short programs and tuning in the background end on a GPU: exit codes and the program's own errors.

Four probes, each a fresh process, run `--runs` times (default 3; `--only NAME` for some of them):
- `made_and_ended`: a script that makes a `Selector(isolate=True)` and ends at once (kernelpick's early
  threads are still setting CUDA up);
- `background_here_loop`: with `KERNELPICK_ISOLATE=off`, a tuned kernel's new key tuned in the background
  while the program makes 3,000 calls, each a launch, a torch op and `torch.cuda.synchronize()`; counts the
  calls whose synchronize raised;
- `background_here_ends`: the same configuration, the program ending 1 s after its first call;
- `background_workers_ends`: the key tuned in the background in workers (the GPU default: isolation
  on), the program ending 0, 0.5, 1 or 2 s after its first call (run by run); before 2026-12-01's
  change such a key was not waited for at exit, and the tuning thread could be in torch's C++ code as
  the interpreter finalized (which aborted a CPU program timing a choice that could not cross).

Before 97b4d59/73f85d4/2b618cf these gave exit 134 ("terminate called ...") for the first and third, and
failed synchronizes in the second. Run from the repository root on a GPU machine:

    PYTHONPATH=src python3 bench/shutdown_probes.py

Writes bench/results/shutdown_probes-<device>.json (or `--out FOLDER`): per probe, each run's exit code,
seconds and output's last line; with `--only`, the probes run alone (write them elsewhere to keep the rest).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PROBES = ("made_and_ended", "background_here_loop", "background_here_ends", "background_workers_ends")
#: Seconds `background_workers_ends` waits after its first call before it ends, by run.
ENDS_AFTER_S = (0.0, 0.5, 1.0, 2.0)


def background_scale() -> tuple[Any, Any, Any, Any]:
    """A tuned kernel whose new keys are tuned in the background (8 configs), a 4M-float input, its
    output and grid (also `bench/capture_during_tuning.py`'s)."""
    import torch
    import triton
    import triton.language as tl

    import kernelpick

    configs = [kernelpick.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024, 2048) for w in (4, 8)]

    @kernelpick.autotune(configs=configs, key=["n"], background=True)
    @triton.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        index = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + index, 2 * tl.load(x_ptr + index, mask=index < n), mask=index < n)

    x = torch.randn(1 << 22, device="cuda")
    return scale, x, torch.empty_like(x), lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)


def role(probe: str, delay_s: float) -> None:
    """Run one probe in this process; its last line of output says what it saw."""
    import torch

    import kernelpick

    if probe == "made_and_ended":
        kernelpick.Selector("twice", [kernelpick.extern(lambda x: x * 2, name="times")], isolate=True)
        print("made", flush=True)
        return
    scale, x, out, grid = background_scale()
    calls = 3000 if probe == "background_here_loop" else 1
    errors = 0
    for _ in range(calls):
        try:
            scale[grid](x, out, x.numel())
            x.mul(3)
            torch.cuda.synchronize()
        except Exception:  # what a capture in the tuning thread made of the program's own sync
            errors += 1
    if probe.endswith("_ends"):
        time.sleep(delay_s)
    print(f"calls {calls} errors {errors}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds an ending probe waits")
    parser.add_argument("--only", action="append", choices=PROBES, help="run this probe (repeatable)")
    args = parser.parse_args()
    if args.role:
        role(args.role, args.delay)
        return
    sys.path[:0] = [str(HERE.parent)]
    from common import environment, write_result

    report: dict[str, Any] = {"environment": environment(), "probes": {}}
    for probe in args.only or PROBES:
        runs = []
        for run in range(args.runs):
            env = {**os.environ, "KERNELPICK_CACHE_DIR": tempfile.mkdtemp(prefix="kp-shutdown-")}
            if probe.startswith("background_here"):
                env["KERNELPICK_ISOLATE"] = "off"
            delay = ENDS_AFTER_S[run % len(ENDS_AFTER_S)] if probe == "background_workers_ends" else 1.0
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, str(HERE), "--role", probe, "--delay", str(delay)],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            lines = [line for line in (done.stdout + done.stderr).splitlines() if "Warning" not in line]
            runs.append(
                {
                    "exit": done.returncode,
                    **({"ends_after_s": delay} if probe.endswith("_ends") else {}),
                    "seconds": round(time.perf_counter() - started, 2),
                    "last": lines[-1] if lines else "",
                }
            )
            print(probe, runs[-1], flush=True)
        report["probes"][probe] = runs
    write_result("shutdown_probes", report, args.out)


if __name__ == "__main__":
    main()
