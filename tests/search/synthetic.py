"""A synthetic recorded GEMM space, shaped like a real one, for replay tests until recorded ones
exist; and a benchmarker of a known function, for tests that need exact times.

Time follows a smooth model of a tiled GEMM on a 132-SM GPU (waves of programs, tile efficiency
growing with tile size, pipelining, warps per tile), times a fixed per-config roughness; configs
over the shared memory or with too many accumulators per thread fail with out_of_resources, and
about one in a hundred fails to compile.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.config import Config
from kernelpick.search.replay import Recorded, RecordedSpace
from kernelpick.search.space import Space, gemm_shared_memory

SHARED_MEMORY = 232448  # an H100's opt-in shared memory per block
MULTIPROCESSORS = 132


def gemm_space(small: bool = False) -> Space:
    """2,400 combinations, 2,304 of them meeting the constraint; `small`: 200, 192 of them."""
    return Space(
        BLOCK_M=[16, 32, 64, 128, 256],
        BLOCK_N=[16, 32, 64, 128, 256],
        BLOCK_K=[32, 64] if small else [16, 32, 64, 128],
        GROUP_M=[8] if small else [1, 8],
        num_warps=[2, 8] if small else [2, 4, 8],
        num_stages=[3, 4] if small else [2, 3, 4, 5],
        constraint=lambda c: c["BLOCK_M"] * c["BLOCK_N"] <= 128 * 256,
    )


BOWL_SPACE = Space(
    BLOCK_M=[16, 32, 64, 128, 256],
    BLOCK_N=[16, 32, 64, 128, 256],
    num_warps=[2, 4, 8],
    num_stages=[2, 3, 4, 5],
)
#: The fastest config of the bowl.
OPTIMUM = Config({"BLOCK_M": 64, "BLOCK_N": 128}, num_warps=4, num_stages=3)


def bowl(config: Config, effort: float) -> float:
    """Fastest at OPTIMUM, slower with each step away along any dimension."""
    m, n = math.log2(config.kwargs["BLOCK_M"] / 64), math.log2(config.kwargs["BLOCK_N"] / 128)
    warps, stages = math.log2(config.num_warps / 4), config.num_stages - 3
    return 1.0 + m * m + n * n + 0.5 * warps * warps + 0.3 * stages * stages


def _time_ms(c: dict[str, int], m: int, n: int, k: int) -> float:
    bm, bn, bk, warps, stages = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["num_warps"], c["num_stages"]
    programs = math.ceil(m / bm) * math.ceil(n / bn)
    waves = math.ceil(programs / MULTIPROCESSORS)
    intensity = (bm * bn) / (bm + bn)  # flops per byte loaded, up to a constant
    efficiency = intensity / (intensity + 24.0)
    efficiency *= 1.0 - 0.35 * math.exp(-(stages - 1))  # deeper pipelines hide more latency
    efficiency *= 1.0 - 0.25 * abs(math.log2(bk / 64)) / 2  # K tiles of 64 suit the tensor cores
    ideal_warps = max(2, min(8, bm * bn // 4096))
    efficiency *= 1.0 - 0.12 * abs(math.log2(warps / ideal_warps))
    efficiency *= 1.0 if c["GROUP_M"] == 8 or programs < 64 else 0.93  # L2 reuse
    tile_ms = 2e-9 * bm * bn * k / efficiency
    return 0.004 + waves * tile_ms


def recorded_gemm(
    m: int = 4096, n: int = 4096, k: int = 4096, seed: int = 0, small: bool = False
) -> RecordedSpace:
    """The synthetic recording of `gemm_space(small)` at one shape."""
    draw = random.Random(seed)
    entries = {}
    for config in gemm_space(small).configs():
        c = {**config.kwargs, **config.options()}
        roughness = math.exp(draw.gauss(0.0, 0.04))
        compile_s = 1.0 + 0.4 * c["num_stages"] * (c["BLOCK_M"] * c["BLOCK_N"]) / (128 * 128)
        accumulators = c["BLOCK_M"] * c["BLOCK_N"] / (c["num_warps"] * 32)
        if gemm_shared_memory(c) > SHARED_MEMORY or accumulators > 256:
            entries[config] = Recorded("out_of_resources", None, 0.0, compile_s, 0.0, "out of resources")
        elif draw.random() < 0.01:
            entries[config] = Recorded("compile_error", None, 0.0, compile_s * 0.5, 0.0, "compile error")
        else:
            median = _time_ms(c, m, n, k) * roughness
            spread = 0.003 + 0.01 * draw.random()
            entries[config] = Recorded("ok", median, spread, compile_s, 0.05 + 0.02 * median, "")
    return RecordedSpace("synthetic H100", "matmul", {"M": m, "N": n, "K": k, "dtype": "float16"}, entries)


class Bench:
    """A benchmarker of a known function: `times(config, effort)` in ms (None: the config fails to
    compile), with a relative `spread`; records every batch it is given, and takes one simulated
    second per batch."""

    def __init__(self, times: Callable[[Config, float], float | None], spread: float = 0.0) -> None:
        self.times = times
        self.spread = spread
        self.batches: list[tuple[list[Config], float]] = []

    def measure(self, configs: Sequence[Config], effort: float) -> dict[Config, BenchmarkResult]:
        self.batches.append((list(configs), effort))
        results = {}
        for config in configs:
            ms = self.times(config, effort)
            results[config] = (
                BenchmarkResult.failed("compile_error", "does not compile")
                if ms is None
                else BenchmarkResult("ok", TimingSummary(ms, ms, ms, ms, 2 * self.spread * ms, 5, 0))
            )
        return results

    def clock(self) -> float:
        return float(len(self.batches))
