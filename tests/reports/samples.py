"""Tuning logs for the report tests: real interpreted tunings, and GPU-like GEMM selections with searches."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import torch
import triton

import kernelpick
from kernelpick import Selector, extern, settings
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.bench.verify import VERIFICATION_VERSION
from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.record import TuningRecord, tuning_entry
from kernelpick.engine.signature import Signature
from kernelpick.store.base import CandidateResult
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.sqlite import SQLiteStore
from kernelpick.tensors import TensorSpec
from tests.select.test_selector import fast_add, slow_add
from tests.tune.kernels import add_kernel, grid_1d

H100 = DeviceInfo("cuda", 0, "NVIDIA H100 80GB HBM3", (9, 0), 50 * 2**20, 132)
#: Two block sizes, two warp counts, and a block size the compiler rejects (not a power of two).
SPACE = [
    *(triton.Config({"BLOCK": block}, num_warps=warps) for block in (16, 256) for warps in (2, 4)),
    triton.Config({"BLOCK": 48}),
]
STRATEGIES = ("exhaustive", "random", "random", "model")


def tune_for_real(log: Path, sizes: tuple[int, ...] = (1000, 3000)) -> kernelpick.Autotuner:
    """Autotune `add_kernel` over `SPACE` in the interpreter for each size, and select between two
    extern adds, writing the tuning log at `log`."""
    with settings.override(log_path=log):
        kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        for n in sizes:
            x = torch.randn(n)
            kernel[grid_1d(n)](x, x, torch.empty(n), n)
        Selector("add", [extern(slow_add), extern(fast_add)])(torch.randn(64, 64), torch.randn(64, 64))
    return kernel


def gemm_record(m: int, n: int, k: int, seed: int = 0) -> TuningRecord:
    """A selection of `kernelpick.ops.mm` for fp16 (m, k) @ (k, n) as an H100 could have timed it: cuBLAS
    and 48 template configs, a few out of resources."""
    rng = random.Random(seed)
    device = torch.device("cuda", 0)
    a = TensorSpec.contiguous((m, k), torch.float16, device)
    b = TensorSpec.contiguous((k, n), torch.float16, device)
    signature = Signature((a, b), (), None, H100)
    ideal_ms = 2 * m * n * k / 700e12 * 1e3  # 700 TFLOP/s at best
    results = [
        CandidateResult(
            "extern", {"kind": "extern", "name": "torch.mm"}, _ok(ideal_ms * 1.08), name="torch.mm"
        )
    ]
    for block_m in (64, 128, 256):
        for block_n in (64, 128, 256):
            for warps in (4, 8):
                for stages in (3, 4):
                    config = Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 64}, warps, stages)
                    name = f"triton_mm[{config}]"
                    description = {
                        "kind": "template",
                        "name": name,
                        "template": "gemm",
                        "config": config.to_data(),
                    }
                    if block_m * block_n * stages > 256 * 128 * 3:
                        result = BenchmarkResult.failed("out_of_resources", "out of resource: shared memory")
                    else:
                        slower = 1 + abs(block_m - 128) / 200 + abs(block_n - 128) / 300 + (warps == 4) * 0.1
                        result = _ok(ideal_ms * slower * rng.uniform(1.0, 1.05))
                    results.append(CandidateResult(config.digest, description, result, name=name))
    ranked = tuple(sorted(results, key=lambda r: r.result.cost_ms))
    return TuningRecord.of_selection(
        "kernelpick.ops.mm", (), signature, ranked, ranked[0].digest, 42.0, False, reference="torch.mm"
    )


def _ok(ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary(ms, ms, ms * 0.98, ms * 1.03, ms * 0.01, 100, 2, "cudagraph"))


def search_trace(record: TuningRecord, strategy: str, seed: int) -> dict[str, Any]:
    """A search's trace as the log holds it: the configs it timed in order, when, and their costs."""
    rng = random.Random(seed)
    timed = list(record.candidates)
    rng.shuffle(timed)
    if strategy != "exhaustive":
        timed = timed[: len(timed) // 3]
    evaluations, seconds = [], 0.0
    for choice in timed:
        seconds += rng.uniform(0.2, 0.6)
        cost = choice.result.cost_ms if choice.result.ok else None
        evaluations.append({"seconds": round(seconds, 3), "candidate": choice.name, "cost_ms": cost})
    return {"strategy": strategy, "seed": seed, "evaluations": evaluations}


def write_gemm_log(
    path: Path, shapes: tuple[tuple[int, int, int], ...] = ((4096, 4096, 4096), (512, 512, 8192))
) -> Path:
    """A tuning log of `kernelpick.ops.mm` on an H100: per shape, one tuning per search in `STRATEGIES`."""
    lines = []
    for m, n, k in shapes:
        record = gemm_record(m, n, k)
        for seed, strategy in enumerate(STRATEGIES):
            entry = tuning_entry(record)
            entry["search"] = search_trace(record, strategy, seed)
            lines.append(json.dumps(entry))
    with path.open("a") as out:
        out.write("\n".join(lines) + "\n")
    return path


#: Selections of `kernelpick.ops.mm` an H100 made (bf16 `x @ W.T`, M from 1 to 8192), as recorded by
#: bench/gemm_suite.py. A new GPU run of the suite changes them: the tests that quote its figures, and
#: docs/ops-decisions.md, which a test compares with the command's output, then take the new ones.
GEMM_SUITE_H100 = Path(__file__).resolve().parents[2] / "bench" / "results" / "gemm_suite-h100.json"


def store_of_suite(suite: Path, path: Path) -> Path:
    """A result store at `path` holding every selection a bench/gemm_suite.py result recorded: each
    shape's candidates as it timed them, its pick, its device and the toolchain of its run."""
    data = json.loads(suite.read_text())
    store = SQLiteStore(path)
    for shape in data["shapes"]:
        record = shape["kernelpick"]["record"]
        run = data["runs"][shape["run"]]
        versions = run["versions"]
        key = TuningKey(
            record["selector"],
            VERIFICATION_VERSION,
            record["device"],
            ".".join(map(str, run["capability"])),
            Toolchain(versions["triton"], versions["torch"], versions["cuda"]),
            tuple(record["signature"]),
        )
        results = [
            CandidateResult(r["digest"], r["choice"], BenchmarkResult.from_dict(r)) for r in record["results"]
        ]
        best = next(r["digest"] for r in record["results"] if r["name"] == record["best"])
        store.save(key, results, pick=best)
    store.close()
    return path
