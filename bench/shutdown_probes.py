"""How short programs and tuning in the background end on a GPU: exit codes and the program's own errors.

Three probes, each a fresh process, run `--runs` times (default 3):
- `made_and_ended`: a script that makes a `Selector(isolate=True)` and ends at once (kernelpick's early
  threads are still setting CUDA up);
- `background_here_loop`: with `KERNELPICK_ISOLATE=off`, a tuned kernel's new key tuned in the background
  while the program makes 3,000 calls, each a launch, a torch op and `torch.cuda.synchronize()`; counts the
  calls whose synchronize raised;
- `background_here_ends`: the same configuration, the program ending 1 s after its first call.

Before 97b4d59/73f85d4/2b618cf these gave exit 134 ("terminate called ...") for the first and third, and
failed synchronizes in the second. Run from the repository root on a GPU machine:

    PYTHONPATH=src python3 bench/shutdown_probes.py

Writes bench/results/shutdown_probes-<device>.json: per probe, each run's exit code, seconds and output's
last line.
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
PROBES = ("made_and_ended", "background_here_loop", "background_here_ends")


def role(probe: str) -> None:
    """Run one probe in this process; its last line of output says what it saw."""
    import torch
    import triton
    import triton.language as tl

    import kernelpick

    if probe == "made_and_ended":
        kernelpick.Selector("twice", [kernelpick.extern(lambda x: x * 2, name="times")], isolate=True)
        print("made", flush=True)
        return
    configs = [kernelpick.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024, 2048) for w in (4, 8)]

    @kernelpick.autotune(configs=configs, key=["n"], background=True)
    @triton.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        index = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + index, 2 * tl.load(x_ptr + index, mask=index < n), mask=index < n)

    x = torch.randn(1 << 22, device="cuda")
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)  # noqa: E731
    calls = 3000 if probe == "background_here_loop" else 1
    errors = 0
    for _ in range(calls):
        try:
            scale[grid](x, out, x.numel())
            x.mul(3)
            torch.cuda.synchronize()
        except Exception:  # what a capture in the tuning thread made of the program's own sync
            errors += 1
    if probe == "background_here_ends":
        time.sleep(1.0)
    print(f"calls {calls} errors {errors}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.role:
        role(args.role)
        return
    sys.path[:0] = [str(HERE.parent)]
    from common import environment, write_result

    report: dict[str, Any] = {"environment": environment(), "probes": {}}
    for probe in PROBES:
        runs = []
        for _ in range(args.runs):
            env = {**os.environ, "KERNELPICK_CACHE_DIR": tempfile.mkdtemp(prefix="kp-shutdown-")}
            if probe != "made_and_ended":
                env["KERNELPICK_ISOLATE"] = "off"
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, str(HERE), "--role", probe],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            lines = [line for line in (done.stdout + done.stderr).splitlines() if "Warning" not in line]
            runs.append(
                {
                    "exit": done.returncode,
                    "seconds": round(time.perf_counter() - started, 2),
                    "last": lines[-1] if lines else "",
                }
            )
            print(probe, runs[-1], flush=True)
        report["probes"][probe] = runs
    write_result("shutdown_probes", report, args.out)


if __name__ == "__main__":
    main()
