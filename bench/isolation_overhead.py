"""What isolation costs per choice: selecting and autotuning in worker processes vs in the caller.

Runs anywhere (CPU: extern choices and Triton's interpreter; GPU: the same on the GPU). The worker
pool is started before timing: its one-off start-up (importing torch and Triton) is reported apart.
Writes bench/results/isolation_overhead-<device>.json. Run: PYTHONPATH=src:. python bench/isolation_overhead.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from tests.tune.kernels import add_kernel  # noqa: E402

import kernelpick  # noqa: E402
from kernelpick import settings  # noqa: E402
from kernelpick.device import describe, device_of  # noqa: E402
from kernelpick.workers import pool_for  # noqa: E402
from kernelpick.workers.plan import worker_devices  # noqa: E402

CHOICES = 8
ROUNDS = 5


def _add_0(a, b):  # type: ignore[no-untyped-def]
    return torch.add(a, b)


# Eight distinct, importable externs (names differ, so each is its own choice).
EXTERNS = []
for _index in range(CHOICES):
    _fn = (lambda i: lambda a, b: torch.add(a, b, alpha=1))(_index)
    _fn.__name__ = _fn.__qualname__ = f"add_{_index}"
    globals()[_fn.__name__] = _fn
    EXTERNS.append(_fn)
SELECT = kernelpick.Selector("isolation_overhead", [kernelpick.extern(f) for f in EXTERNS], verify=True)
SPACE = [kernelpick.Config({"BLOCK": b}) for b in (64, 128, 256, 512)]
TUNED = kernelpick.autotune(SPACE, key=["n"])(add_kernel)


def time_selection(isolate: bool, device: torch.device, size: int) -> float:
    a = torch.randn(size, device=device)
    start = time.perf_counter()
    with settings.override(isolate="on" if isolate else "off", cache=False):
        SELECT.clear()
        SELECT.tune(a, a)
    return time.perf_counter() - start


def time_autotune(isolate: bool, device: torch.device, size: int) -> float:
    x = torch.randn(size, device=device)
    out = torch.empty_like(x)
    with settings.override(isolate="on" if isolate else "off", cache=False):
        TUNED._dispatch.entries.clear()
        TUNED._dispatch.fast.clear()
        start = time.perf_counter()
        TUNED[lambda meta: (triton.cdiv(size, meta["BLOCK"]),)](x, x, out, size)
        if device.type == "cuda":
            torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    from common import environment, write_result

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    info = describe(device_of([torch.empty(0, device=device)]))
    with tempfile.TemporaryDirectory() as cache, settings.override(cache_dir=cache):
        pool = pool_for(worker_devices(info))
        start = time.perf_counter()
        pool.start()
        startup = time.perf_counter() - start
        samples: dict[str, list[float]] = {
            k: [] for k in ("select_here", "select_isolated", "tune_here", "tune_isolated")
        }
        for _ in range(ROUNDS):  # interleaved
            samples["select_here"].append(time_selection(False, device, 4096))
            samples["select_isolated"].append(time_selection(True, device, 4096))
            samples["tune_here"].append(time_autotune(False, device, 4096))
            samples["tune_isolated"].append(time_autotune(True, device, 4096))
    medians = {k: statistics.median(v) for k, v in samples.items()}
    per_choice = {
        "select_ms": (medians["select_isolated"] - medians["select_here"]) / CHOICES * 1e3,
        "autotune_ms": (medians["tune_isolated"] - medians["tune_here"]) / len(SPACE) * 1e3,
    }
    report = {
        "environment": environment(),
        "device_label": info.label,
        "choices": CHOICES,
        "configs": len(SPACE),
        "worker_startup_s": startup,
        "samples_s": samples,
        "median_s": medians,
        "overhead_per_candidate_ms": per_choice,
    }
    path = write_result("isolation_overhead", report)
    print(f"wrote {path}")
    print(f"worker start-up: {startup:.2f} s (once per process)")
    for name, value in medians.items():
        print(f"{name:16} {value * 1e3:9.1f} ms")
    print(
        f"overhead per candidate: selection {per_choice['select_ms']:.1f} ms, autotune {per_choice['autotune_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
