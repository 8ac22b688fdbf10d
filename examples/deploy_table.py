"""Tune once, deploy with no tuning: run `python examples/deploy_table.py`.

This file is both a tuning spec (its `JOBS`) and the program that uses the kernels. Run as a script,
it does what a team does before shipping:

1. `kernelpick tune examples/deploy_table.py --export table.json`: every job tunes its kernel (here,
   on a GPU if there is one, else in Triton's interpreter), the results go to the result store, and
   the winners to a deployment table, a JSON file to read, diff and ship;
2. a new process, as on a production machine, with `KERNELPICK_TABLES=table.json`,
   `KERNELPICK_NO_TUNING=1` and an empty result store: every call runs the tabled winner at once; a
   size no job tuned takes the nearest tabled size's winner; an input no table can answer raises
   `TuningRequired` instead of tuning in production.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick.jobs import Job


@kernelpick.autotune(
    [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})],
    key=["n"],
)
@triton.jit
def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def run_scale(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    x = torch.randn(n, device=DEVICE).to(dtype)
    out = torch.empty_like(x)
    scale[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, 2.0)
    torch.testing.assert_close(out, 2 * x)
    return out


#: What `kernelpick tune` runs: one job per size the program will see.
JOBS = [Job(f"scale n={n}", lambda device, n=n: run_scale(n)) for n in (1 << 12, 1 << 16)]


def serve() -> None:
    """What the deployed program does: call the kernels, never tune."""
    for n in (1 << 12, 1 << 16, 50_000):  # 50,000 was not tuned: the nearest tabled size's winner runs
        run_scale(n)
        record = scale.last_tuning
        assert record is not None
        print(f"scale n={n}: {record.best} ({record.note})")
    try:
        run_scale(1 << 12, torch.float64)  # no table has a float64 key
    except kernelpick.TuningRequired as error:
        print(f"float64: TuningRequired: {str(error).splitlines()[0]}")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="kernelpick-deploy-"))
    table = work / "table.json"
    subprocess.run(
        [sys.executable, "-m", "kernelpick.cli", "tune", __file__, "--export", str(table)], check=True
    )
    print(f"table: {table} ({len(table.read_text().splitlines())} lines of JSON)")
    production = {
        **os.environ,
        "KERNELPICK_TABLES": str(table),
        "KERNELPICK_NO_TUNING": "1",
        "KERNELPICK_CACHE_DIR": str(work / "production-store"),  # empty: nothing stored there
    }
    subprocess.run([sys.executable, __file__, "--serve"], env=production, check=True)


if __name__ == "__main__":
    serve() if sys.argv[1:] == ["--serve"] else main()
