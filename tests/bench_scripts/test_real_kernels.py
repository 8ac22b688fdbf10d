# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""bench/real_kernels.py: each tuner's first call, check and timing recorded per case, each tuner in a process
and caches of its own; Triton's tutorial files run with `triton.autotune` replaced; kept on the CPU with --tiny."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import run_bench

#: A stand-in for Triton's tutorial 03 (the real one needs a GPU at import): an autotuned matmul and its
#: `matmul(a, b)`, then, as the tutorial does, a unit test at import time, which must not run.
TUTORIAL_03 = """
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ks = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + (k + ks)[None, :], mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks)[:, None] * N + cols[None, :], mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    matmul_kernel[lambda meta: (triton.cdiv(M, meta["BLOCK"]), triton.cdiv(N, meta["BLOCK"]))](a, b, c, M, N, K)
    return c


torch.manual_seed(0)
raise SystemExit("the tutorial's unit test ran at import")
"""


@pytest.mark.slow
def test_a_tiny_run_records_each_tuner_of_each_case_from_a_process_of_its_own(tmp_path: Path) -> None:
    store = tmp_path / "store"  # a user's result store: each tuner's process has its own
    run_bench(
        "real_kernels.py", "--tiny", "--cases", "03-,09-matmul_tma-", "--out", str(tmp_path),
        env={"KERNELPICK_CACHE_DIR": str(store)},
    )  # fmt: skip
    assert not store.exists()
    data = json.loads((tmp_path / "real_kernels-cpu.json").read_text())
    assert data["settings"]["tiny"] and data["environment"]["triton"]
    names = [entry["case"] for entry in data["cases"]]
    assert names == ["03-matmul-fp16", "09-matmul_tma-fp16", "09-matmul_tma-fp8"]
    for entry in data["cases"][:2]:
        for tuner in ("triton", "kernelpick"):
            result = entry[tuner]
            assert result["ok"] and result["error"] is None, result
            assert result["first_call_s"] > 0 and result["ms"] > 0 and result["configs"] == 2
            [[kernel, pick]] = result["picks"]  # each tuned kernel's name and best_config
            assert kernel.startswith("matmul_kernel") and "BLOCK_SIZE_M" in pick
        assert isinstance(entry["same_picks"], bool)
    fp8 = data["cases"][2]  # skipped where the interpreter rounds to fp8 wrongly, then by both, saying why
    assert fp8["triton"].get("skipped") == fp8["kernelpick"].get("skipped")
    assert fp8["triton"]["ok"] or "fp8" in fp8["triton"]["skipped"]


@pytest.mark.slow
def test_tutorial_files_run_with_kernelpicks_autotune_in_kernelpicks_process(tmp_path: Path) -> None:
    tutorials = tmp_path / "tutorials"
    tutorials.mkdir()
    (tutorials / "03-matrix-multiplication.py").write_text(TUTORIAL_03)
    run_bench(
        "real_kernels.py",
        "--tiny",
        "--tutorials",
        str(tutorials),
        "--cases",
        "03-,flash-",
        "--out",
        str(tmp_path),
    )
    data = json.loads((tmp_path / "real_kernels-tutorials-cpu.json").read_text())
    matmul, flash = data["cases"]
    assert matmul["triton"]["ok"] and matmul["kernelpick"]["ok"], matmul
    assert matmul["triton"]["tuned_by"] == ["triton.runtime.autotuner.Autotuner"]
    assert matmul["kernelpick"]["tuned_by"] == ["kernelpick.tune.autotuner.Autotuner"]
    assert flash["kernelpick"]["skipped"] == "not from a Triton tutorial with a tuned kernel"
