"""Checking many candidates' outputs against one reference: prepared once (`Expected`) or per output.

The measuring checks every candidate's output against the reference's (`kernelpick.bench.verify`).
Since 4df7c61 the reference is widened and its NaN, finite values, RMS and allowed error found once
per measurement (`Expected(reference).why(output)` per candidate); `Expected(reference)` made per
output prepares it for each check, as every check did before. Ten outputs of a bf16 matrix, each way, three
times alternating, on the device given (default: a CUDA GPU if there is one, else the CPU with one
thread). Writes bench/results/verify_prepared-<device>.json.

    PYTHONPATH=src python3 bench/verify_prepared.py [--size 2048x4096] [--outputs 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "src")]

from kernelpick.bench.verify import Expected  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="2048x4096")
    parser.add_argument("--outputs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from common import environment, write_result

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)
    rows, cols = (int(n) for n in args.size.split("x"))
    torch.manual_seed(0)
    want = torch.randn(rows, cols, device=device).to(torch.bfloat16)
    outputs = [
        want + (1e-3 * torch.randn_like(want, dtype=torch.float32)).to(torch.bfloat16)
        for _ in range(args.outputs)
    ]

    def timed(check: object) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        reasons = check()  # type: ignore[operator]
        if device == "cuda":
            torch.cuda.synchronize()
        assert all(r is None for r in reasons), reasons
        return time.perf_counter() - started

    per_output, prepared_once = [], []
    for _ in range(3):
        per_output.append(timed(lambda: [Expected(want).why(o) for o in outputs]))
        prepared_once.append(timed(lambda: (lambda e: [e.why(o) for o in outputs])(Expected(want))))
    report = {
        "environment": environment(),
        "size": [rows, cols],
        "dtype": "bfloat16",
        "outputs": args.outputs,
        "threads": torch.get_num_threads(),
        "seconds": {"prepared_per_output": per_output, "prepared_once": prepared_once},
    }
    for name, runs in report["seconds"].items():
        print(f"{name}: {', '.join(f'{s:.3f}' for s in runs)} s")
    print(f"wrote {write_result('verify_prepared', report, args.out)}")


if __name__ == "__main__":
    main()
